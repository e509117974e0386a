/* gradnet: NDN drop and event counters (ingress).
 * Every NDN packet the switch drops is counted by reason (NDN_DROP_*), every
 * forwarding decision by kind (NDN_EV_*), so counters explain each packet. */
#ifndef _GRADNET_NDN_DROPS_P4_
#define _GRADNET_NDN_DROPS_P4_

#include "ndn_headers.p4"

control NdnDrops(inout ndn_headers_t hdr,
                 inout ndn_metadata_t meta,
                 inout standard_metadata_t standard_metadata) {

    counter(NDN_DROP_REASON_COUNT, CounterType.packets_and_bytes) ndn_drops;
    counter(NDN_EV_COUNT, CounterType.packets_and_bytes) ndn_events;

    action drop_and_count() {
        mark_to_drop(standard_metadata);
        ndn_drops.count((bit<32>)meta.drop_reason);
    }

    apply {
        if (meta.drop_reason != 0) {
            drop_and_count();
        } else if (meta.event != 0) {
            ndn_events.count((bit<32>)meta.event);
        }
    }
}

#endif  /* _GRADNET_NDN_DROPS_P4_ */
