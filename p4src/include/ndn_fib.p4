/* gradnet: NDN FIB, longest-prefix match on name components (ingress).
 *
 * One ternary table keyed by the six prefix hashes h_1..h_6 (ndn_name_hash.p4):
 * the entry of a k-component prefix matches h_k exactly, wildcards the others,
 * and has priority k, so the longest matching prefix wins in one lookup. The port
 * goes to meta.next_hop (0: no route): the ingress sends a forwarded Interest there,
 * and checks that a distribute Data came in on it (the face toward the PS). Looked up
 * once for every NDN packet, before the PITs.
 */
#ifndef _GRADNET_NDN_FIB_P4_
#define _GRADNET_NDN_FIB_P4_

#include "ndn_headers.p4"

control NdnFib(inout ndn_headers_t hdr,
               inout ndn_metadata_t meta,
               inout standard_metadata_t standard_metadata) {

    action set_next_hop(port_t port) {
        meta.next_hop = port;
    }

    /* The ingress decides whether a missing route drops the packet (NDN_DROP_NO_ROUTE):
     * an aggregated Interest or an ordinary Data does not need one. */
    action no_route() {
        meta.next_hop = 0;
    }

    table fib {
        key = {
            meta.h1: ternary;
            meta.h2: ternary;
            meta.h3: ternary;
            meta.h4: ternary;
            meta.h5: ternary;
            meta.h6: ternary;
        }
        actions = { set_next_hop; no_route; }
        default_action = no_route();
        size = NDN_FIB_SIZE;
    }

    apply {
        fib.apply();
    }
}

#endif  /* _GRADNET_NDN_FIB_P4_ */
