/* gradnet: per-port source MAC rewrite (egress).
 * Each switch port has its own MAC (the controller derives it from the
 * topology); routed frames leave with that port's MAC as source. */
#ifndef _GRADNET_PORT_MACS_P4_
#define _GRADNET_PORT_MACS_P4_

#include "config.p4"
#include "headers.p4"

control PortMacs(inout headers_t hdr,
                 inout metadata_t meta,
                 inout standard_metadata_t standard_metadata) {

    action set_source_mac(mac_addr_t smac) {
        hdr.ethernet.src_addr = smac;
    }

    table port_macs {
        key = { standard_metadata.egress_port: exact; }
        actions = { set_source_mac; NoAction; }
        default_action = NoAction();
        size = PORT_TABLE_SIZE;
    }

    apply {
        if (hdr.ethernet.isValid()) {
            port_macs.apply();
        }
    }
}

#endif  /* _GRADNET_PORT_MACS_P4_ */
