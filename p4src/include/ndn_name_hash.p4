/* gradnet: NDN name-prefix hashes (ingress).
 *
 * h_k = crc32 over the first k components, each as (type 8 bits, length 8 bits,
 * value 128 bits right-aligned, zero-padded): 18 bytes per component, so the hash
 * of a prefix does not depend on what follows it. The FIB matches h_1..h_6 (longest
 * prefix first), the transient PIT is indexed by h_depth (the whole name).
 * controller/ndn.py computes the same values (prefix_hash).
 *
 * A marked name (/<*insert*>/PS/train/..., /<*unsubscribe*>/..., /<*distribute*>/...)
 * reaches this block with the marker already taken off the slots (ndn.p4), so its
 * hashes are those of /PS/train/...: the FIB names the face toward the PS, where a
 * subscription is sent on and where its Data must come from (ndn_persistent_pit.p4).
 */
#ifndef _GRADNET_NDN_NAME_HASH_P4_
#define _GRADNET_NDN_NAME_HASH_P4_

#include "ndn_headers.p4"

control NdnNameHash(inout ndn_headers_t hdr,
                    inout ndn_metadata_t meta,
                    inout standard_metadata_t standard_metadata) {

    action hash_1() {
        hash(meta.h1, HashAlgorithm.crc32, 32w0, { meta.t0, meta.l0, meta.c0 }, 64w0x100000000);
    }
    action hash_2() {
        hash(meta.h2, HashAlgorithm.crc32, 32w0, { meta.t0, meta.l0, meta.c0, meta.t1, meta.l1, meta.c1 },
             64w0x100000000);
    }
    action hash_3() {
        hash(meta.h3, HashAlgorithm.crc32, 32w0, { meta.t0, meta.l0, meta.c0, meta.t1, meta.l1, meta.c1,
             meta.t2, meta.l2, meta.c2 }, 64w0x100000000);
    }
    action hash_4() {
        hash(meta.h4, HashAlgorithm.crc32, 32w0, { meta.t0, meta.l0, meta.c0, meta.t1, meta.l1, meta.c1,
             meta.t2, meta.l2, meta.c2, meta.t3, meta.l3, meta.c3 }, 64w0x100000000);
    }
    action hash_5() {
        hash(meta.h5, HashAlgorithm.crc32, 32w0, { meta.t0, meta.l0, meta.c0, meta.t1, meta.l1, meta.c1,
             meta.t2, meta.l2, meta.c2, meta.t3, meta.l3, meta.c3, meta.t4, meta.l4, meta.c4 },
             64w0x100000000);
    }
    action hash_6() {
        hash(meta.h6, HashAlgorithm.crc32, 32w0, { meta.t0, meta.l0, meta.c0, meta.t1, meta.l1, meta.c1,
             meta.t2, meta.l2, meta.c2, meta.t3, meta.l3, meta.c3, meta.t4, meta.l4, meta.c4,
             meta.t5, meta.l5, meta.c5 }, 64w0x100000000);
    }

    apply {
        if (meta.depth >= 1) { hash_1(); meta.name_hash = meta.h1; }
        if (meta.depth >= 2) { hash_2(); meta.name_hash = meta.h2; }
        if (meta.depth >= 3) { hash_3(); meta.name_hash = meta.h3; }
        if (meta.depth >= 4) { hash_4(); meta.name_hash = meta.h4; }
        if (meta.depth >= 5) { hash_5(); meta.name_hash = meta.h5; }
        if (meta.depth >= 6) { hash_6(); meta.name_hash = meta.h6; }
    }
}

#endif  /* _GRADNET_NDN_NAME_HASH_P4_ */
