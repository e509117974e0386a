/* gradnet: the smart NIC of token-passing gradient broadcast (token,
 * docs/token.md).
 *
 * A 2-port program between a training node's host (port 1) and the LAN
 * switch (port 2). Frames of other EtherTypes are bridged unchanged; frames
 * of the protocol (EtherType 0x88B5) go through
 *   TokenMembership  formation, member list, non-member drops, watchdog
 *                    (RESEND_DUE to the host, NODE_LOST broadcasts)
 *   TokenAccumulator gradient sums in registers, READ / READ_REPLY
 * and what they accept is passed on: host -> LAN, LAN -> host (GRADs from the
 * LAN are consumed by the accumulator).
 */
#include <core.p4>
#include <v1model.p4>

#include "config.p4"
#include "token_headers.p4"
#include "token_membership.p4"
#include "token_accumulator.p4"
#include "link_emulation.p4"

control NicIngress(inout token_headers_t hdr,
                   inout token_metadata_t meta,
                   inout standard_metadata_t standard_metadata) {
    TokenMembership() membership;
    TokenAccumulator() accumulator;

    apply {
        membership.apply(hdr, meta, standard_metadata);
        accumulator.apply(hdr, meta, standard_metadata);
        if (meta.tk.handled == 0) {
            /* bridge: what the NIC passes on crosses to the other side */
            if (standard_metadata.ingress_port == NIC_HOST_PORT) {
                standard_metadata.egress_spec = NIC_LAN_PORT;
            } else {
                standard_metadata.egress_spec = NIC_HOST_PORT;
            }
        }
    }
}

/* MyEgress, as in forward.p4: controller/deploy.py's LinkEmulation drives its
 * per-port emulated loss (the loss sweep, bench/loss_bench.py). */
control MyEgress(inout token_headers_t hdr,
                 inout token_metadata_t meta,
                 inout standard_metadata_t standard_metadata) {
    LinkEmulation() link_emulation;

    /* The LAN copy of a TOKEN whose sender's broadcast arrived incomplete here
     * (TokenAccumulator's tail check): this NIC's NACK for the missing fragments. */
    action nack_copy() {
        hdr.ethernet.dst_addr = 0xFFFFFFFFFFFF;
        hdr.ethernet.src_addr = meta.tk.my_mac;
        hdr.token.msg_type = TOKEN_MSG_NACK;
        hdr.token.flags = 0;
        hdr.token.sender = meta.tk.my_seq;
        hdr.token.next_holder = 0;
        hdr.token.member = meta.tk.nack_member;
        hdr.token.batch = meta.tk.rx_batch;
        hdr.token.frag = meta.tk.nack_lo;
        hdr.token.nfrags = meta.tk.nack_hi;
        hdr.token.pass_no = 0;
        hdr.token.bitmap = 0;
        hdr.token.count = 0;
        hdr.token.mac = 0;
        hdr.token.aux = 0;
    }

    apply {
        if (meta.tk.nack == 1 && hdr.token.isValid() && !hdr.values.isValid()
                && standard_metadata.egress_port == NIC_LAN_PORT) {
            nack_copy();
        }
        link_emulation.apply(standard_metadata);
    }
}

V1Switch(TokenParser(),
         TokenVerifyChecksum(),
         NicIngress(),
         MyEgress(),
         TokenComputeChecksum(),
         TokenDeparser()) main;
