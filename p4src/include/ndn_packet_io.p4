/* gradnet: packet-in header for ndn.p4 (egress), as packet_io.p4 does for the
 * IP programs: a packet leaving on CPU_PORT names the port it came in on. */
#ifndef _GRADNET_NDN_PACKET_IO_P4_
#define _GRADNET_NDN_PACKET_IO_P4_

#include "ndn_headers.p4"

control NdnPacketIn(inout ndn_headers_t hdr,
                    inout ndn_metadata_t meta,
                    inout standard_metadata_t standard_metadata) {
    apply {
        if (standard_metadata.egress_port == CPU_PORT) {
            hdr.packet_in.setValid();
            hdr.packet_in.ingress_port = standard_metadata.ingress_port;
            hdr.packet_in._pad = 0;
        }
    }
}

#endif  /* _GRADNET_NDN_PACKET_IO_P4_ */
