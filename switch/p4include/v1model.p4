/*
 * v1model.p4 -- declarations of the v1model architecture (the BMv2 simple_switch pipeline),
 * written for tailfabric's software target from the v1model documentation.
 *
 * Pipeline: Parser -> VerifyChecksum -> Ingress -> (traffic manager) -> Egress
 *           -> ComputeChecksum -> Deparser.
 *
 * Versions: define V1MODEL_VERSION before including this file to choose the declarations;
 * it defaults to 20180101. From 20200408 on, counter, meter and register take the type of
 * their index as a type parameter (I), and the port fields of standard_metadata_t use the
 * PortId_t typedef.
 */

#ifndef _V1_MODEL_P4_
#define _V1_MODEL_P4_

#include <core.p4>

#ifndef V1MODEL_VERSION
#define V1MODEL_VERSION 20180101
#endif

/* Match kinds that v1model adds to core.p4's exact, ternary and lpm. */
match_kind {
    range,     // the key lies in [low, high]
    optional,  // exact match on the value, or a wildcard that matches anything
    selector   // the key feeds an action_selector's hash
}

/* The version of these declarations, readable by programs. */
const bit<32> __v1model_version = V1MODEL_VERSION;

#if V1MODEL_VERSION >= 20200408
typedef bit<9> PortId_t;
#endif

/* Per-packet metadata that the architecture fills in and reads back. */
struct standard_metadata_t {
#if V1MODEL_VERSION >= 20200408
    PortId_t ingress_port;      // port the packet arrived on
    PortId_t egress_spec;       // set in ingress: the output port (511 drops)
    PortId_t egress_port;       // in egress: the port the packet leaves on
#else
    bit<9>   ingress_port;
    bit<9>   egress_spec;
    bit<9>   egress_port;
#endif
    bit<32>  instance_type;     // normal, clone, resubmit, recirculate, replication (see docs)
    bit<32>  packet_length;     // bytes
    bit<32>  enq_timestamp;     // microseconds, when the packet entered the egress queue
    bit<19>  enq_qdepth;        // queue depth (packets) at enqueue time
    bit<32>  deq_timedelta;     // microseconds the packet spent in the queue
    bit<19>  deq_qdepth;        // queue depth (packets) at dequeue time
    bit<48>  ingress_global_timestamp;  // microseconds, when ingress processing started
    bit<48>  egress_global_timestamp;   // microseconds, when egress processing started
    bit<16>  mcast_grp;         // set in ingress: multicast group to replicate to (0: none)
    bit<16>  egress_rid;        // replication id of this multicast copy
    bit<1>   checksum_error;    // 1 if verify_checksum found a mismatch
    error    parser_error;      // the error the parser ended with
    bit<3>   priority;          // queue priority
}

enum CounterType {
    packets,
    bytes,
    packets_and_bytes
}

enum MeterType {
    packets,
    bytes
}

/* An array of counters, indexed 0 .. size-1. */
#if V1MODEL_VERSION >= 20200408
extern counter<I> {
    counter(bit<32> size, CounterType type);
    void count(in I index);
}
#else
extern counter {
    counter(bit<32> size, CounterType type);
    void count(in bit<32> index);
}
#endif

/* One counter per entry of the table it is attached to (table property 'counters'). */
extern direct_counter {
    direct_counter(CounterType type);
    void count();
}

/* Colors written by meters. */
#define V1MODEL_METER_COLOR_GREEN  0
#define V1MODEL_METER_COLOR_YELLOW 1
#define V1MODEL_METER_COLOR_RED    2

/* An array of two-rate three-color meters, indexed 0 .. size-1. */
#if V1MODEL_VERSION >= 20200408
extern meter<I> {
    meter(bit<32> size, MeterType type);
    void execute_meter<T>(in I index, out T result);
}
#else
extern meter {
    meter(bit<32> size, MeterType type);
    void execute_meter<T>(in bit<32> index, out T result);
}
#endif

/* One meter per entry of the table it is attached to (table property 'meters'). */
extern direct_meter<T> {
    direct_meter(MeterType type);
    void read(out T result);
}

/* An array of size values of type T that persists across packets. */
#if V1MODEL_VERSION >= 20200408
extern register<T, I> {
    register(bit<32> size);
    @noSideEffects
    void read(out T result, in I index);
    void write(in I index, in T value);
}
#else
extern register<T> {
    register(bit<32> size);
    @noSideEffects
    void read(out T result, in bit<32> index);
    void write(in bit<32> index, in T value);
}
#endif

/* A table implementation whose entries refer to shared action members. */
extern action_profile {
    action_profile(bit<32> size);
}

/* Writes a random value in lo .. hi (inclusive) to result. */
extern void random<T>(out T result, in T lo, in T hi);

/* Sends data to the control plane as a digest message (receiver: conventionally 1). */
extern void digest<T>(in bit<32> receiver, in T data);

enum HashAlgorithm {
    crc32,
    crc32_custom,
    crc16,
    crc16_custom,
    random,
    identity,
    csum16,
    xor16
}

/* Marks the packet to be dropped: egress_spec = drop port, mcast_grp = 0. */
@deprecated("Please use mark_to_drop(standard_metadata) instead.")
extern void mark_to_drop();
@pure
extern void mark_to_drop(inout standard_metadata_t standard_metadata);

/* result = base + (hash of data) % max, or base when max is 0. */
@pure
extern void hash<O, T, D, M>(out O result, in HashAlgorithm algo, in T base, in D data, in M max);

/* An action profile whose member is chosen by a hash of the 'selector' keys. */
extern action_selector {
    action_selector(HashAlgorithm algorithm, bit<32> size, bit<32> outputWidth);
}

enum CloneType {
    I2E,  // clone from ingress to egress
    E2E   // clone from egress to egress
}

@deprecated("Please use verify_checksum/update_checksum instead.")
extern Checksum16 {
    Checksum16();
    bit<16> get<D>(in D data);
}

/*
 * Checksums, for the VerifyChecksum and ComputeChecksum controls. data is a tuple (list
 * expression) of bit<W>/int<W>/varbit<W> fields; O is bit<W>; algo must be a constant.
 * verify_* set standard_metadata.checksum_error when condition holds and the checksum is wrong;
 * update_* write the checksum when condition holds. The *_with_payload forms also cover the
 * bytes of the packet that the parser did not extract.
 */
extern void verify_checksum<T, O>(in bool condition, in T data, in O checksum, HashAlgorithm algo);
@pure
extern void update_checksum<T, O>(in bool condition, in T data, inout O checksum, HashAlgorithm algo);
extern void verify_checksum_with_payload<T, O>(in bool condition, in T data, in O checksum, HashAlgorithm algo);
@noSideEffects
extern void update_checksum_with_payload<T, O>(in bool condition, in T data, inout O checksum, HashAlgorithm algo);

/* Clones the packet to the mirroring session; the clone goes to egress. */
extern void clone(in CloneType type, in bit<32> session);

/* Sends the packet back to the parser after ingress (resubmit) or egress (recirculate). */
@deprecated("Please use 'resubmit_preserving_field_list' instead")
extern void resubmit<T>(in T data);
/* Preserves the user metadata fields annotated @field_list(index). */
extern void resubmit_preserving_field_list(bit<8> index);

@deprecated("Please use 'recirculate_preserving_field_list' instead")
extern void recirculate<T>(in T data);
extern void recirculate_preserving_field_list(bit<8> index);

@deprecated("Please use 'clone_preserving_field_list' instead")
extern void clone3<T>(in CloneType type, in bit<32> session, in T data);
extern void clone_preserving_field_list(in CloneType type, in bit<32> session, bit<8> index);

/* Cuts the outgoing packet to at most length bytes. */
extern void truncate(in bit<32> length);

/* Debugging aids: assert fails the run when check is false (BMv2 logs it and stops); assume is
   a hint for verification tools. */
extern void assert(in bool check);
extern void assume(in bool check);

/* Logs msg; in the second form each "{}" in msg is replaced by a field of data (a struct or tuple). */
extern void log_msg(string msg);
extern void log_msg<T>(string msg, in T data);

/* The programmable blocks. H: struct of headers; M: struct of user metadata. */
parser Parser<H, M>(packet_in b,
                    out H parsedHdr,
                    inout M meta,
                    inout standard_metadata_t standard_metadata);

control VerifyChecksum<H, M>(inout H hdr,
                             inout M meta);

control Ingress<H, M>(inout H hdr,
                      inout M meta,
                      inout standard_metadata_t standard_metadata);

control Egress<H, M>(inout H hdr,
                     inout M meta,
                     inout standard_metadata_t standard_metadata);

control ComputeChecksum<H, M>(inout H hdr,
                              inout M meta);

control Deparser<H>(packet_out b, in H hdr);

package V1Switch<H, M>(Parser<H, M> p,
                       VerifyChecksum<H, M> vr,
                       Ingress<H, M> ig,
                       Egress<H, M> eg,
                       ComputeChecksum<H, M> ck,
                       Deparser<H> dep);

#endif  /* _V1_MODEL_P4_ */
