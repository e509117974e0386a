/* gradnet: the LAN switch of token-passing gradient broadcast (token,
 * docs/token.md): L2 forwarding by destination MAC, broadcasts flooded to
 * every other port (LanSwitch, token_lan.p4).
 */
#include <core.p4>
#include <v1model.p4>

#include "config.p4"
#include "token_headers.p4"
#include "token_lan.p4"
#include "link_emulation.p4"

control LanIngress(inout token_headers_t hdr,
                   inout token_metadata_t meta,
                   inout standard_metadata_t standard_metadata) {
    LanSwitch() lan;

    apply {
        lan.apply(hdr, meta, standard_metadata);
    }
}

/* MyEgress, as in forward.p4: controller/deploy.py's LinkEmulation drives its
 * per-port emulated loss (the loss sweep, bench/loss_bench.py). */
control MyEgress(inout token_headers_t hdr,
                 inout token_metadata_t meta,
                 inout standard_metadata_t standard_metadata) {
    LinkEmulation() link_emulation;

    apply {
        link_emulation.apply(standard_metadata);
    }
}

V1Switch(LanParser(),
         TokenVerifyChecksum(),
         LanIngress(),
         MyEgress(),
         TokenComputeChecksum(),
         TokenDeparser()) main;
