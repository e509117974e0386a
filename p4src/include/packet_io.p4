/* gradnet: packet-in to the controller (egress), in every program with a CPU port.
 * A packet that leaves on CPU_PORT (a route, an ACL or a technique sent it
 * there, or a clone session to CPU_PORT) gets the packet_in header
 * (headers.p4) naming the port it came in on; the P4Runtime server turns it
 * into a PacketIn. */
#ifndef _GRADNET_PACKET_IO_P4_
#define _GRADNET_PACKET_IO_P4_

#include "config.p4"
#include "headers.p4"

control CpuPacketIn(inout packet_in_t pkt_in,
                    in standard_metadata_t standard_metadata) {
    apply {
        if (standard_metadata.egress_port == CPU_PORT) {
            pkt_in.setValid();
            pkt_in.ingress_port = standard_metadata.ingress_port;
            pkt_in._pad = 0;
        }
    }
}

#endif  /* _GRADNET_PACKET_IO_P4_ */
