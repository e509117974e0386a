/* gradnet: the LAN switch of token-passing broadcast (token,
 * docs/token.md): an Ethernet switch. Frames to a known MAC (l2_forward,
 * installed by the controller) go to its port; broadcasts and unknown
 * destinations are flooded through multicast group = ingress port, which the
 * controller fills with every other port. Frames are counted per ingress port;
 * a frame whose source MAC is not its port's is dropped (port_sources).
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
    counter(NUM_PORTS, CounterType.packets) lan_source_drops;
    bit<1> spoofed = 0;

    /* Port security: once the controller has installed every port's MAC (and set
     * the default to wrong_source), a frame whose source MAC is not the one behind
     * its ingress port is dropped and counted: no LAN host can speak for another. */
    action source_ok() { }
    action any_source() { }
    action wrong_source() {
        mark_to_drop(standard_metadata);
        lan_source_drops.count((bit<32>)standard_metadata.ingress_port);
        spoofed = 1;
    }

    table port_sources {
        key = {
            standard_metadata.ingress_port: exact;
            hdr.ethernet.src_addr: exact;
        }
        actions = { source_ok; any_source; wrong_source; }
        default_action = any_source();
        size = 1024;
    }

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
        port_sources.apply();
        if (spoofed == 1) {
            return;
        }
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
