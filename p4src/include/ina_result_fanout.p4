/* gradnet: multicast trees whose leaves are unicasts (egress).
 *
 * A packet routed to a multicast group (forwarding.p4 set_multicast_group, or
 * the aggregator sending a RESULT) is replicated by the PRE. Replicas toward
 * another switch keep the group's address (replication id 0) and are
 * replicated again there; a replica toward a host carries a non-zero
 * replication id, and this table rewrites it into an ordinary unicast to that
 * host, so hosts need no multicast membership.
 */
#ifndef _GRADNET_RESULT_FANOUT_P4_
#define _GRADNET_RESULT_FANOUT_P4_

#include "config.p4"
#include "headers.p4"

control ResultFanout(inout headers_t hdr,
                     inout metadata_t meta,
                     inout standard_metadata_t standard_metadata) {

    action set_worker_destination(ipv4_addr_t worker_ip, mac_addr_t worker_mac) {
        hdr.ipv4.dst_addr = worker_ip;
        hdr.ethernet.dst_addr = worker_mac;
        /* the UDP checksum covers the destination address: 0 = not computed */
        if (hdr.udp.isValid()) {
            hdr.udp.checksum = 0;
        }
    }

    table ina_result_fanout {
        key = { standard_metadata.egress_rid: exact; }
        actions = { set_worker_destination; NoAction; }
        default_action = NoAction();
        size = INA_FANOUT_SIZE;
    }

    apply {
        /* instance_type 5: a replica made by the PRE */
        if (hdr.ipv4.isValid() && standard_metadata.instance_type == 5
                && standard_metadata.egress_rid != 0) {
            ina_result_fanout.apply();
        }
    }
}

#endif  /* _GRADNET_RESULT_FANOUT_P4_ */
