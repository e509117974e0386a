/* gradnet: DSCP -> egress queue priority (ingress).
 *
 * Sets standard_metadata.priority, which BMv2 (--priority-queues N) and the
 * embedded target use to pick the egress queue (higher = served first).
 * Differentiated gradient transmission (differentiated) marks important blocks
 * with a high DSCP. The key is the whole diffserv byte, ternary, so entries
 * usually mask out ECN (mask 0xFC) and carry a priority to order overlaps. */
#ifndef _GRADNET_PRIORITY_P4_
#define _GRADNET_PRIORITY_P4_

#include "config.p4"
#include "headers.p4"

control PriorityClassifier(inout headers_t hdr,
                           inout metadata_t meta,
                           inout standard_metadata_t standard_metadata) {

    action set_priority(bit<3> prio) {
        standard_metadata.priority = prio;
    }

    table dscp_priority {
        key = { hdr.ipv4.diffserv: ternary; }
        actions = { set_priority; NoAction; }
        default_action = NoAction();
        size = DSCP_PRIORITY_SIZE;
    }

    apply {
        if (hdr.ipv4.isValid()) {
            dscp_priority.apply();
        }
    }
}

#endif  /* _GRADNET_PRIORITY_P4_ */
