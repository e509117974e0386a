/* gradnet: NDN transient PIT in registers (ingress).
 *
 * Entry i = low NDN_PIT_BITS bits of the name hash: (name hash, bitmap of in-ports
 * 1..8, expiry time). An Interest whose name has a live entry that lacks its
 * in-port is aggregated (the port is added, nothing is sent on); otherwise it
 * (re)starts the entry and goes to the FIB (a retransmission from a port already
 * in the entry is sent on again). A Data with a live entry of its name goes to the
 * entry's ports (multicast group id = the bitmap, installed by the controller for
 * every subset of the switch's ports) and consumes the entry. A different name
 * that hashes to a live entry's index takes it over (the older Interest is then
 * unsatisfied and its consumer retransmits).
 */
#ifndef _GRADNET_NDN_PIT_P4_
#define _GRADNET_NDN_PIT_P4_

#include "ndn_headers.p4"

control TransientPit(inout ndn_headers_t hdr,
                     inout ndn_metadata_t meta,
                     inout standard_metadata_t standard_metadata) {

    register<bit<32>>(NDN_PIT_SIZE) pit_name;
    register<bit<8>>(NDN_PIT_SIZE)  pit_ports;
    register<bit<48>>(NDN_PIT_SIZE) pit_expiry;

    bit<32> index;
    bit<32> stored_name;
    bit<8>  stored_ports;
    bit<48> expiry;
    bit<48> lifetime;
    bit<8>  in_bit;

    action set_lifetime(bit<48> microseconds) {
        lifetime = microseconds;
    }

    /* Keyless: the controller sets the entry lifetime (default 4 s). */
    table pit_config {
        actions = { set_lifetime; }
        default_action = set_lifetime(4000000);
    }

    apply {
        pit_config.apply();
        index = (bit<32>)meta.name_hash[NDN_PIT_BITS - 1:0];
        pit_name.read(stored_name, index);
        pit_ports.read(stored_ports, index);
        pit_expiry.read(expiry, index);
        bool live = stored_name == meta.name_hash && stored_ports != 0
                    && standard_metadata.ingress_global_timestamp < expiry;
        if (meta.is_interest == 1) {
            if (standard_metadata.ingress_port < 1 || standard_metadata.ingress_port > NDN_PIT_PORTS) {
                meta.drop_reason = NDN_DROP_PORT_RANGE;
            } else {
                in_bit = (bit<8>)1 << (bit<8>)(standard_metadata.ingress_port - 1);
                if (live && (stored_ports & in_bit) == 0) {
                    pit_ports.write(index, stored_ports | in_bit);
                    meta.forward = 0;
                } else {
                    pit_name.write(index, meta.name_hash);
                    pit_ports.write(index, live ? stored_ports | in_bit : in_bit);
                    pit_expiry.write(index, standard_metadata.ingress_global_timestamp + lifetime);
                    meta.forward = 1;
                }
            }
        } else {
            if (live) {
                standard_metadata.mcast_grp = (bit<16>)stored_ports;
                pit_ports.write(index, 0);
            } else {
                meta.drop_reason = NDN_DROP_UNSOLICITED;
            }
        }
    }
}

#endif  /* _GRADNET_NDN_PIT_P4_ */
