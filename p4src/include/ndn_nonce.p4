/* gradnet: NDN Interest nonces, duplicate and loop suppression (ingress).
 *
 * Every Interest that carries a Nonce leaves (name hash, nonce) in a register slot
 * chosen by a crc32 of both, kept for the Interest's lifetime (InterestLifetime, 4 s
 * when absent, at most NDN_MAX_NONCE_US). An Interest whose (name, nonce) is still
 * there came round a loop or is a copy: a counted NDN_DROP_DUPLICATE_NONCE drop. A
 * consumer's retransmission carries a fresh nonce (hosts/ndn/requester.py: Requester), so it
 * passes. A different pair that hashes to the same slot overwrites it: at worst a
 * duplicate is then missed, never a fresh Interest dropped.
 *
 * Not checked: packets the controller sends back through the pipeline (they were checked
 * when they first came in, then punted) and Interests without a Nonce.
 */
#ifndef _GRADNET_NDN_NONCE_P4_
#define _GRADNET_NDN_NONCE_P4_

#include "ndn_headers.p4"

control NdnNonce(inout ndn_headers_t hdr,
                 inout ndn_metadata_t meta,
                 inout standard_metadata_t standard_metadata) {

    register<bit<64>>(NDN_NONCE_SIZE) nonce_tag;
    register<bit<48>>(NDN_NONCE_SIZE) nonce_expiry;

    bit<32> slot;
    bit<64> tag;
    bit<64> stored;
    bit<48> expiry;
    bit<48> keep;

    apply {
        if (meta.drop_reason == 0 && meta.is_interest == 1 && meta.via_controller == 0
                && hdr.ndn_nonce.isValid()) {
            tag = meta.name_hash ++ hdr.ndn_nonce.value;
            hash(slot, HashAlgorithm.crc32, 32w0, { meta.name_hash, hdr.ndn_nonce.value, meta.insert,
                 meta.unsubscribe }, 64w0x100000000);
            slot = slot & (NDN_NONCE_SIZE - 1);
            nonce_tag.read(stored, slot);
            nonce_expiry.read(expiry, slot);
            if (stored == tag && standard_metadata.ingress_global_timestamp < expiry) {
                meta.drop_reason = NDN_DROP_DUPLICATE_NONCE;
            } else {
                keep = (bit<48>)(meta.lifetime_ms == 0 ? (bit<32>)NDN_DEFAULT_LIFETIME_MS : meta.lifetime_ms) * 1000;
                if (keep > NDN_MAX_NONCE_US) {
                    keep = NDN_MAX_NONCE_US;
                }
                nonce_tag.write(slot, tag);
                nonce_expiry.write(slot, standard_metadata.ingress_global_timestamp + keep);
            }
        }
    }
}

#endif  /* _GRADNET_NDN_NONCE_P4_ */
