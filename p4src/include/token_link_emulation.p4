/* gradnet: per-port link emulation for nic.p4 and lan.p4 (egress): random loss.
 * link_emulation.p4 over the token programs' header and metadata types, with the same
 * table, action and counter names, so controller/deploy.py's LinkEmulation
 * drives both. */
#ifndef _GRADNET_TOKEN_LINK_EMULATION_P4_
#define _GRADNET_TOKEN_LINK_EMULATION_P4_

#include "token_headers.p4"

control TokenLinkEmulation(inout token_headers_t hdr,
                           inout token_metadata_t meta,
                           inout standard_metadata_t standard_metadata) {

    counter(NUM_PORTS, CounterType.packets) link_emulation_drops;

    action set_loss_rate(bit<32> drop_threshold) {
        meta.loss_threshold = drop_threshold;
        random(meta.loss_random, 32w0, 32w0xFFFFFFFF);
    }

    action no_loss() {
        meta.loss_threshold = 0;
    }

    table link_loss {
        key = { standard_metadata.egress_port: exact; }
        actions = { set_loss_rate; no_loss; }
        default_action = no_loss();
        size = PORT_TABLE_SIZE;
    }

    apply {
        link_loss.apply();
        if (meta.loss_random < meta.loss_threshold) {
            mark_to_drop(standard_metadata);
            link_emulation_drops.count((bit<32>)standard_metadata.egress_port);
        }
    }
}

#endif  /* _GRADNET_TOKEN_LINK_EMULATION_P4_ */
