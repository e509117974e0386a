/* gradnet: the LAN switch of token-passing broadcast (technique 5,
 * docs/token.md): an Ethernet switch. Frames to a known MAC (l2_forward,
 * installed by the controller) go to its port; broadcasts and unknown
 * destinations are flooded through multicast group = ingress port, which the
 * controller fills with every other port. Frames are counted per ingress port.
 */
#ifndef _GRADNET_TOKEN_LAN_P4_
#define _GRADNET_TOKEN_LAN_P4_

#include "token_headers.p4"

/* The LAN switch looks at the Ethernet header only: the rest is payload. */
parser LanParser(packet_in packet,
                 out token_headers_t hdr,
                 inout token_metadata_t meta,
                 inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ethernet);
        transition accept;
    }
}

control LanSwitch(inout token_headers_t hdr,
                  inout token_metadata_t meta,
                  inout standard_metadata_t standard_metadata) {

    counter(NUM_PORTS, CounterType.packets) lan_frames;
    counter(NUM_PORTS, CounterType.packets) lan_hairpin_drops;

    action forward(port_t port) {
        standard_metadata.egress_spec = port;
    }

    action flood() {
        standard_metadata.mcast_grp = (bit<16>)standard_metadata.ingress_port;
    }

    table l2_forward {
        key = { hdr.ethernet.dst_addr: exact; }
        actions = { forward; flood; }
        default_action = flood();
        size = 1024;
    }

    apply {
        lan_frames.count((bit<32>)standard_metadata.ingress_port);
        l2_forward.apply();
        if (standard_metadata.mcast_grp == 0
                && standard_metadata.egress_spec == standard_metadata.ingress_port) {
            /* the destination sits behind the port it came from */
            mark_to_drop(standard_metadata);
            lan_hairpin_drops.count((bit<32>)standard_metadata.ingress_port);
        }
    }
}

#endif  /* _GRADNET_TOKEN_LAN_P4_ */
