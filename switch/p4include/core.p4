/*
 * core.p4 -- the P4-16 core library (P4-16 language specification, "P4 core library").
 *
 * Written for tailfabric's software target from the specification; every P4-16 program
 * includes it, directly or through an architecture file such as v1model.p4.
 */

#ifndef _CORE_P4_
#define _CORE_P4_

/* Error constants every parser may signal; architectures and programs can add more. */
error {
    NoError,               // no error
    PacketTooShort,        // not enough bits in the packet for extract
    NoMatch,               // a select expression had no matching case
    StackOutOfBounds,      // a header stack was accessed out of its bounds
    HeaderTooShort,        // a varbit field was extracted with a size larger than its maximum
    ParserTimeout,         // the parser ran out of time
    ParserInvalidArgument  // a parser operation was called with an unsupported argument
}

/* The packet being parsed; only parsers receive one. */
extern packet_in {
    /* Read a fixed-size header and advance past it; sets it valid. */
    void extract<T>(out T hdr);
    /* Read a header whose single varbit field is variableFieldSizeInBits long. */
    void extract<T>(out T variableSizeHeader, in bit<32> variableFieldSizeInBits);
    /* The next sizeof(T) bits of the packet, without advancing. */
    T lookahead<T>();
    /* Skip sizeInBits bits of the packet. */
    void advance(in bit<32> sizeInBits);
    /* Total length of the packet in bytes (not every target can provide it). */
    bit<32> length();
}

/* The packet being assembled by a deparser. */
extern packet_out {
    /* Append hdr (a header, stack, union or struct of them); invalid headers are skipped. */
    void emit<T>(in T hdr);
}

/* In a parser: if check is false, stop parsing with error toSignal. */
extern void verify(in bool check, in error toSignal);

/* The action that does nothing: the usual default action of a table (p4c gives it the same
   annotation, which its P4Info repeats). */
@noWarn("unused")
action NoAction() {}

/* Match kinds of table keys that every target supports. */
match_kind {
    exact,    // the key equals the entry's value
    ternary,  // the key equals the value under the entry's mask
    lpm       // longest-prefix match
}

/* Compile-time assertions: fail compilation with message (or a default one) when check is false. */
extern bool static_assert(bool check, string message);
extern bool static_assert(bool check);

#endif  /* _CORE_P4_ */
