// multicast.p4 -- multicast replication through the packet replication engine.
//
// Covers: standard_metadata.mcast_grp set in ingress; groups and nodes created
// with STF mc_mgrp_create / mc_node_create <rid> <ports...> /
// mc_node_associate <group> <node handle>; one copy per (node, port), each with
// its own egress_port; standard_metadata.egress_rid = the node's rid in egress;
// instance_type 5 (replication) in egress; header changes made in ingress are
// present in every copy; mcast_grp 0 means unicast (instance_type 0).
// Node handles are assigned by BMv2 in creation order starting at 0.
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8>  grp;
    bit<8>  v;
    bit<16> rid;
    bit<8>  port;
    bit<8>  inst;
}

struct headers_t { h_t h; }
struct metadata_t { }

parser MyParser(packet_in pkt, out headers_t hdr, inout metadata_t meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        pkt.extract(hdr.h);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control MyIngress(inout headers_t hdr, inout metadata_t meta,
                  inout standard_metadata_t standard_metadata) {
    apply {
        hdr.h.v = 0x5E;
        if (hdr.h.grp != 0) {
            standard_metadata.mcast_grp = (bit<16>)hdr.h.grp;
        } else {
            standard_metadata.egress_spec = 4;
        }
    }
}

control MyEgress(inout headers_t hdr, inout metadata_t meta,
                 inout standard_metadata_t standard_metadata) {
    apply {
        hdr.h.rid = standard_metadata.egress_rid;
        hdr.h.port = (bit<8>)standard_metadata.egress_port;
        hdr.h.inst = (bit<8>)standard_metadata.instance_type;
    }
}

control MyComputeChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control MyDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.h);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(),
         MyComputeChecksum(), MyDeparser()) main;
