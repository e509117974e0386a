/* gradnet: source-address binding at the edge (docs/trust.md, "IP: source addresses bound
 * to ports").
 *
 * The controller knows where every host is attached: on each switch it binds every
 * host-facing port to the MAC and IPv4 address of the host interface behind it
 * (source_bindings -> host_port(mac, ip)), marks the switch-facing ports exempt
 * (fabric_port: what arrives there was checked where it entered) and turns the default
 * for any other port to unknown_port. An IPv4 frame from a host port whose source MAC
 * or source address is not the port's is marked (meta.src_spoof); forwarding.p4
 * drops it as SRC_SPOOF and counts it in ingress_drops with the other drops, after
 * its structural checks (a malformed frame keeps its reason: parser_error,
 * ip_options...) and before the route lookup. So a host, member of a job or not, cannot send under another host's
 * addresses, whatever it carries (differentiated blocks, the baselines' TCP, BCube
 * exchanges).
 *
 * Open (the P4 default, fabric_port for every port: a deployment that installs no
 * bindings) checks nothing. Controller packet-outs are not checked (CPU port).
 */
#ifndef _GRADNET_SOURCE_GUARD_P4_
#define _GRADNET_SOURCE_GUARD_P4_

#include "config.p4"
#include "headers.p4"

control SourceGuard(inout headers_t hdr,
                    inout metadata_t meta,
                    inout standard_metadata_t standard_metadata) {

    bool bound = false;
    mac_addr_t bound_mac = 0;
    ipv4_addr_t bound_ip = 0;

    /* A host port: only this MAC (every frame) and this IPv4 source (IPv4 frames). */
    action host_port(mac_addr_t mac, ipv4_addr_t ip) {
        bound = true;
        bound_mac = mac;
        bound_ip = ip;
    }

    /* A switch-facing port, or an open deployment: no check. */
    action fabric_port() { }

    /* A port the controller bound to nothing while guarding: nothing is accepted. */
    action unknown_port() {
        meta.src_spoof = 1;
    }

    table source_bindings {
        key = { standard_metadata.ingress_port: exact; }
        actions = { host_port; fabric_port; unknown_port; }
        default_action = fabric_port();
        size = PORT_TABLE_SIZE;
    }

    apply {
        /* IPv4 only: forwarding drops everything else anyway (not_ipv4), and frames
         * a switch-side interface emits itself (IPv6 neighbour discovery on BMv2's
         * veths) keep that reason. */
        if (!hdr.packet_out.isValid() && hdr.ipv4.isValid()) {
            source_bindings.apply();
            if (bound) {
                if (hdr.ethernet.src_addr != bound_mac || hdr.ipv4.src_addr != bound_ip) {
                    meta.src_spoof = 1;
                }
            }
        }
    }
}

#endif  /* _GRADNET_SOURCE_GUARD_P4_ */
