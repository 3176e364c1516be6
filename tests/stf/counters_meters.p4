// counters_meters.p4 -- indexed counter, direct counter, meter, direct meter.
//
// Covers: counter(size, CounterType.packets).count(index); a direct_counter
// attached to a table with `counters = ...`; meter(size, MeterType.packets)
// .execute_meter(index, out color); a direct_meter attached with `meters = ...`
// and read in the table's action. No meter rates are configured, and an
// unconfigured BMv2 meter always returns GREEN (0). Counters have no effect on
// packets; the STF issues `counter_read` and `check_counter` (BMv2's STF runner
// does not check either; a runner that does sees 3/1/0 packets on pkt_ctr[1/3/0]
// and 3 packets / 9 bytes on the direct counter of the idx=1 entry).
// h.color = color from the indexed meter, h.dcolor = color from the direct
// meter (0xEE if the table missed and the direct meter was not executed).
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> idx;
    bit<8> color;
    bit<8> dcolor;
}

struct headers_t { h_t h; }

struct metadata_t {
    bit<8> color;
    bit<8> dcolor;
}

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
    counter(8, CounterType.packets) pkt_ctr;
    meter(4, MeterType.packets) mtr;
    direct_counter(CounterType.packets_and_bytes) dctr;
    direct_meter<bit<8>>(MeterType.bytes) dmtr;

    action fwd(bit<9> port) {
        standard_metadata.egress_spec = port;
        dmtr.read(meta.dcolor);
    }
    action fwd_miss() {
        standard_metadata.egress_spec = 2;
    }

    table tbl_cnt {
        key = { hdr.h.idx: exact; }
        actions = { fwd; fwd_miss; }
        default_action = fwd_miss();
        counters = dctr;
        meters = dmtr;
    }

    apply {
        pkt_ctr.count((bit<32>)hdr.h.idx);
        mtr.execute_meter((bit<32>)hdr.h.idx, meta.color);
        hdr.h.color = meta.color;
        meta.dcolor = 0xEE;
        tbl_cnt.apply();
        hdr.h.dcolor = meta.dcolor;
    }
}

control MyEgress(inout headers_t hdr, inout metadata_t meta,
                 inout standard_metadata_t standard_metadata) {
    apply { }
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
