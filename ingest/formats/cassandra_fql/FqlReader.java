/*
 * Reads a Cassandra full query log (the chronicle-queue directory `nodetool enablefullquerylog` writes) and prints
 * one JSON object per record on standard output, for tailtune's `cassandra-fql` reader
 * (ingest/formats/cassandra_fql/binlog.py). Compiled against the cassandra-all jars (their chronicle-queue reads
 * the log; FullQueryLogger and BinLog name its fields): `python -m ingest.formats.cassandra_fql.binlog build`.
 *
 * Usage: java -cp <classes>:<cassandra lib>/* FqlReader DIR [ROLL_CYCLE]   (the roll cycle: the log's own)
 *
 * A record (docs/formats.md § cassandra-fql):
 *   {"record": N, "file": "<cycle file>", "offset": B, "type": "single-query"|"batch", "start_ms": ...,
 *    "protocol": ..., "keyspace": ...|null, "query": "...", "values": [V, ...]}               (single-query)
 *   {..., "batch_type": "LOGGED", "queries": ["...", ...], "batch_values": [[V, ...], ...]}   (batch)
 * V is the bound value in hex, null for a null value, "unset" for an unset one; "names" lists the value names
 * when the client bound values by name. N counts records from 1 in the order the log holds them; B is the byte
 * offset of the record's header in its file.
 *
 * The cycle files are walked document by document, as chronicle lays them out (chronicle-wire's header: a 32-bit
 * little-endian word, NOT_COMPLETE 0x80000000, META_DATA 0x40000000, the length in the low 30 bits; documents
 * aligned to 4 bytes when the store's data version says so; END_OF_DATA closes a cycle), against the store's own
 * write position (the header `writePosition`: the offset of the last record the writer completed). A log that
 * cannot be read whole ends the output with {"error": "...", "record": N, "file": ..., "offset": B} and exit
 * status 3: a header that is zero or an end-of-data marker at or before the write position (a hole), a record
 * that is not complete at or before the write position or before another record, a file that ends inside a record
 * or before its write position, a metadata document that is not one of chronicle's own (a record with its
 * metadata bit set), a record that cannot be read. A log still being written (its last record not complete, after
 * the write position, in the last cycle) ends with {"unfinished": {"file": ..., "offset": B, "bytes": L}}
 * (L: the bytes from that record's header to the end of what was written) and exit status 0.
 *
 * Anything the libraries log goes to standard error: standard output carries the records only.
 */

import java.io.BufferedWriter;
import java.io.File;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.OutputStreamWriter;
import java.io.PrintStream;
import java.io.Writer;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.NavigableSet;

import net.openhft.chronicle.bytes.BytesUtil;
import net.openhft.chronicle.bytes.MappedBytes;
import net.openhft.chronicle.queue.RollCycles;
import net.openhft.chronicle.queue.impl.single.MetaDataKeys;
import net.openhft.chronicle.queue.impl.single.SingleChronicleQueue;
import net.openhft.chronicle.queue.impl.single.SingleChronicleQueueBuilder;
import net.openhft.chronicle.queue.impl.single.SingleChronicleQueueStore;
import net.openhft.chronicle.wire.ValueIn;
import net.openhft.chronicle.wire.Wire;
import net.openhft.chronicle.wire.WireIn;
import net.openhft.chronicle.wire.Wires;
import org.apache.cassandra.fql.FullQueryLogger;
import org.apache.cassandra.utils.binlog.BinLog;

public final class FqlReader
{
    private static final char[] HEX = "0123456789abcdef".toCharArray();

    private static final class BadRecord extends RuntimeException
    {
        BadRecord(String message)
        {
            super(message);
        }
    }

    public static void main(String[] args) throws IOException
    {
        // the records own the real standard output; whatever the libraries print goes to standard error
        PrintStream stdout = new PrintStream(new FileOutputStream(FileDescriptor.out), false, StandardCharsets.UTF_8);
        System.setOut(System.err);
        Writer out = new BufferedWriter(new OutputStreamWriter(stdout, StandardCharsets.UTF_8), 1 << 16);
        if (args.length < 1 || args.length > 2)
        {
            System.err.println("usage: FqlReader DIR [ROLL_CYCLE]");
            System.exit(2);
        }
        File dir = new File(args[0]);
        Walk walk = new Walk(out);
        int status = 0;
        SingleChronicleQueueBuilder builder = SingleChronicleQueueBuilder.single(dir).readOnly(true);
        if (args.length == 2)
            builder.rollCycle(RollCycles.valueOf(args[1]));
        try (SingleChronicleQueue queue = builder.build())
        {
            NavigableSet<Long> cycles = queue.listCyclesBetween(queue.firstCycle(), queue.lastCycle());
            long last = cycles.isEmpty() ? -1 : cycles.last();
            for (long cycle : cycles)
            {
                SingleChronicleQueueStore store = queue.storeForCycle((int) cycle, queue.epoch(), false, null);
                if (store == null)
                    throw new BadLog(null, -1, "the file of cycle " + cycle + " cannot be opened");
                try
                {
                    walk.cycle(queue, store, cycle == last);
                }
                finally
                {
                    queue.closeStore(store);
                }
                if (walk.unfinished != null)
                    break;
            }
            if (walk.unfinished == null)
            {
                // a .cq4 file chronicle does not list as a cycle of this log would be left out unread
                File[] files = dir.listFiles((d, n) -> n.endsWith(SingleChronicleQueue.SUFFIX));
                for (File f : files == null ? new File[0] : files)
                    if (!walk.walked.contains(f.getName()))
                        throw new BadLog(f.getName(), -1, "not a cycle file of this log (its name does not follow the "
                                                          + "log's roll cycle, " + queue.rollCycle() + ")");
            }
            else
                out.append(walk.unfinished).append('\n');
        }
        catch (BadLog e)
        {
            status = 3;
            error(out, e.getMessage(), walk.record, e.file, e.offset);
        }
        catch (BadRecord e)
        {
            status = 3;
            error(out, "cannot read the record: " + e.getMessage(), walk.record, walk.file, walk.offset);
        }
        catch (Throwable e) // chronicle throws checked exceptions it does not declare (a damaged file)
        {
            status = 3;
            error(out, "cannot read the log: " + e, walk.record, walk.file, walk.offset);
        }
        out.flush();
        stdout.flush();
        System.exit(status);
    }

    /** A log that cannot be read whole: where (the cycle file, the byte offset of the document's header) and why. */
    private static final class BadLog extends RuntimeException
    {
        final String file;
        final long offset;

        BadLog(String file, long offset, String message)
        {
            super(message);
            this.file = file;
            this.offset = offset;
        }
    }

    /** The walk over the cycle files' documents; prints each data record. */
    private static final class Walk
    {
        private final Writer out;
        private final StringBuilder line = new StringBuilder(256);
        final java.util.Set<String> walked = new java.util.HashSet<>();
        long record;
        String file;
        long offset = -1;
        String unfinished;

        Walk(Writer out)
        {
            this.out = out;
        }

        void cycle(SingleChronicleQueue queue, SingleChronicleQueueStore store, boolean lastCycle) throws IOException
        {
            file = store.file().getName();
            walked.add(file);
            offset = -1;
            long size = store.file().length();
            long writePosition = store.writePosition();
            boolean padding = store.dataVersion() > 0;
            MappedBytes bytes = store.bytes();
            try
            {
                Wire wire = queue.wireType().apply(bytes);
                walk(bytes, wire, size, writePosition, padding, lastCycle);
            }
            finally
            {
                bytes.releaseLast();
            }
        }

        private BadLog bad(long at, String message)
        {
            return new BadLog(file, at, message);
        }

        private void walk(MappedBytes bytes, Wire wire, long size, long writePosition, boolean padding,
                          boolean lastCycle) throws IOException
        {
            String wp = " (the log's write position, its last complete record, is byte " + writePosition + ")";
            StringBuilder name = new StringBuilder();
            long pos = 0;
            while (true)
            {
                if (padding)
                    pos += BytesUtil.padOffset(pos);
                offset = pos;
                if (pos + Wires.SPB_HEADER_SIZE > size)
                {
                    if (pos <= writePosition)
                        throw bad(pos, "the file ends at byte " + size + ", before its last record" + wp);
                    return; // the file ends where its records do
                }
                int header = bytes.readVolatileInt(pos);
                if (header == Wires.NOT_INITIALIZED)
                {
                    if (pos <= writePosition)
                        throw bad(pos, "no record header here (zero bytes): a hole in the log before its end" + wp);
                    return; // the end of what was written
                }
                if (header == Wires.END_OF_DATA)
                {
                    if (pos <= writePosition)
                        throw bad(pos, "an end-of-data marker before the log's last record" + wp);
                    return; // the cycle's end-of-file marker
                }
                int length = Wires.lengthOf(header);
                if ((header & Wires.NOT_COMPLETE) != 0)
                {
                    String what = "the record is not complete (its header's not-ready bit is set)";
                    if (pos <= writePosition)
                        throw bad(pos, what + " at or before the log's write position: the writer had completed it"
                                       + wp);
                    if (!lastCycle)
                        throw bad(pos, what + " in a cycle file the log has rolled over from");
                    long end;
                    if (length == Wires.UNKNOWN_LENGTH)
                        end = writtenEnd(bytes, pos, size);
                    else
                    {
                        end = Math.min(size, pos + Wires.SPB_HEADER_SIZE + length);
                        long next = end + (padding ? BytesUtil.padOffset(end) : 0);
                        if (next + Wires.SPB_HEADER_SIZE <= size && bytes.readVolatileInt(next) != 0)
                            throw bad(pos, what + ", and it is not the last record: another follows at byte "
                                           + next);
                    }
                    StringBuilder sb = new StringBuilder("{\"unfinished\": {\"file\": ");
                    string(sb, file);
                    sb.append(", \"offset\": ").append(pos).append(", \"bytes\": ").append(end - pos).append("}}");
                    unfinished = sb.toString();
                    return;
                }
                long start = pos + Wires.SPB_HEADER_SIZE;
                if (start + length > size)
                    throw bad(pos, "the file ends at byte " + size + ", inside this record of " + length + " bytes");
                bytes.readPositionRemaining(start, length);
                if ((header & Wires.META_DATA) != 0)
                {
                    name.setLength(0);
                    wire.readEventName(name);
                    if (!chronicleMetaData(name, pos))
                        throw bad(pos, "a metadata document that is not chronicle's own ('" + printable(name)
                                       + "'; a record with its header's metadata bit set?)");
                }
                else
                {
                    record++;
                    line.setLength(0);
                    line.append("{\"record\": ").append(record).append(", \"file\": ");
                    string(line, file);
                    line.append(", \"offset\": ").append(pos);
                    readRecord(wire, record, line);
                    out.append(line).append('\n');
                }
                pos = start + length;
            }
        }

        /** Chronicle's own metadata: the store's header first, then index documents (MetaDataKeys). */
        private static boolean chronicleMetaData(CharSequence name, long pos)
        {
            String n = name.toString();
            if (pos == 0)
                return MetaDataKeys.header.name().equals(n);
            return MetaDataKeys.index2index.name().equals(n) || MetaDataKeys.index.name().equals(n)
                   || MetaDataKeys.roll.name().equals(n);
        }

        /** The end of what was written after `pos`: past its last non-zero byte (the file may be preallocated). */
        private static long writtenEnd(MappedBytes bytes, long pos, long size)
        {
            long end = pos + Wires.SPB_HEADER_SIZE;
            for (long p = end; p < size; p++)
                if (bytes.readByte(p) != 0)
                    end = p + 1;
            return end;
        }

        private static String printable(CharSequence s)
        {
            StringBuilder sb = new StringBuilder();
            for (int i = 0; i < s.length() && i < 64; i++)
            {
                char c = s.charAt(i);
                sb.append(c >= 0x20 && c < 0x7f ? c : '?');
            }
            return sb.toString();
        }
    }

    private static void error(Writer out, String message, long record, String file, long offset) throws IOException
    {
        StringBuilder sb = new StringBuilder();
        sb.append("{\"error\": ");
        string(sb, message);
        sb.append(", \"record\": ").append(record).append(", \"file\": ");
        string(sb, file);
        sb.append(", \"offset\": ");
        if (offset < 0)
            sb.append("null");
        else
            sb.append(offset);
        sb.append('}');
        out.append(sb).append('\n');
    }

    private static void readRecord(WireIn wire, long record, StringBuilder sb)
    {
        StringBuilder name = new StringBuilder();
        String type = null;
        byte[] options = null;
        int protocol = -1;
        boolean sawQuery = false;
        while (wire.hasMore())
        {
            ValueIn in = wire.read(name);
            String field = name.toString();
            switch (field)
            {
                case BinLog.VERSION:
                    long version = in.int64();
                    if (version > FullQueryLogger.CURRENT_VERSION)
                        throw new BadRecord("record version " + version + " is newer than this reader knows ("
                                            + FullQueryLogger.CURRENT_VERSION + ")");
                    break;
                case BinLog.TYPE:
                    type = in.text();
                    if (!FullQueryLogger.SINGLE_QUERY.equals(type) && !FullQueryLogger.BATCH.equals(type))
                        throw new BadRecord("record type '" + type + "' is neither " + FullQueryLogger.SINGLE_QUERY
                                            + " nor " + FullQueryLogger.BATCH);
                    sb.append(", \"type\": ");
                    string(sb, type);
                    break;
                case FullQueryLogger.QUERY_START_TIME:
                    sb.append(", \"start_ms\": ").append(in.int64());
                    break;
                case FullQueryLogger.PROTOCOL_VERSION:
                    protocol = (int) in.int64();
                    sb.append(", \"protocol\": ").append(protocol);
                    break;
                case FullQueryLogger.QUERY_OPTIONS:
                    options = in.bytes();
                    break;
                case FullQueryLogger.GENERATED_TIMESTAMP:
                case FullQueryLogger.GENERATED_NOW_IN_SECONDS:
                    in.int64();
                    break;
                case FullQueryLogger.KEYSPACE:
                    sb.append(", \"keyspace\": ");
                    string(sb, in.text());
                    break;
                case FullQueryLogger.QUERY:
                    sawQuery = true;
                    sb.append(", \"query\": ");
                    string(sb, in.text());
                    break;
                case FullQueryLogger.BATCH_TYPE:
                    sb.append(", \"batch_type\": ");
                    string(sb, in.text());
                    break;
                case FullQueryLogger.QUERIES:
                {
                    int n = in.int32();
                    if (n < 0)
                        throw new BadRecord("negative number of batch queries: " + n);
                    sb.append(", \"queries\": [");
                    for (int i = 0; i < n; i++)
                    {
                        if (i > 0)
                            sb.append(", ");
                        string(sb, in.text());
                    }
                    sb.append(']');
                    break;
                }
                case FullQueryLogger.VALUES:
                {
                    int n = in.int32();
                    if (n < 0)
                        throw new BadRecord("negative number of batch statements: " + n);
                    sb.append(", \"batch_values\": [");
                    for (int i = 0; i < n; i++)
                    {
                        int m = in.int32();
                        if (m < 0)
                            throw new BadRecord("negative number of values of batch statement " + (i + 1) + ": " + m);
                        sb.append(i > 0 ? ", [" : "[");
                        for (int j = 0; j < m; j++)
                        {
                            if (j > 0)
                                sb.append(", ");
                            byte[] value = in.bytes();
                            if (value == null)
                                sb.append("null");
                            else
                                hex(sb, value, 0, value.length);
                        }
                        sb.append(']');
                    }
                    sb.append(']');
                    break;
                }
                default:
                    throw new BadRecord("unknown field '" + field + "'");
            }
        }
        if (type == null)
            throw new BadRecord("no type field");
        if (options == null)
            throw new BadRecord("no " + FullQueryLogger.QUERY_OPTIONS + " field");
        if (protocol < 0)
            throw new BadRecord("no " + FullQueryLogger.PROTOCOL_VERSION + " field");
        if (FullQueryLogger.SINGLE_QUERY.equals(type))
        {
            if (!sawQuery)
                throw new BadRecord("a " + type + " record without its " + FullQueryLogger.QUERY + " field");
            queryOptions(ByteBuffer.wrap(options), protocol, sb);
        }
        sb.append('}');
    }

    /** The bound values of the native protocol's query parameters (consistency, flags, values [with names]). */
    private static void queryOptions(ByteBuffer b, int protocol, StringBuilder sb)
    {
        try
        {
            b.getShort(); // consistency
            int flags = protocol >= 5 ? b.getInt() : b.get() & 0xff;
            if ((flags & 0x01) == 0)
            {
                sb.append(", \"values\": []");
                return;
            }
            boolean named = (flags & 0x40) != 0;
            int n = b.getShort() & 0xffff;
            List<String> names = new ArrayList<>();
            sb.append(", \"values\": [");
            for (int i = 0; i < n; i++)
            {
                if (named)
                {
                    int len = b.getShort() & 0xffff;
                    byte[] raw = new byte[len];
                    b.get(raw);
                    names.add(new String(raw, StandardCharsets.UTF_8));
                }
                if (i > 0)
                    sb.append(", ");
                int len = b.getInt();
                if (len == -1)
                    sb.append("null");
                else if (len == -2)
                    sb.append("\"unset\"");
                else if (len < 0 || len > b.remaining())
                    throw new BadRecord("query options: value " + (i + 1) + " has length " + len + " with "
                                        + b.remaining() + " bytes left");
                else
                {
                    hex(sb, b.array(), b.position(), len);
                    b.position(b.position() + len);
                }
            }
            sb.append(']');
            if (named)
            {
                sb.append(", \"names\": [");
                for (int i = 0; i < names.size(); i++)
                {
                    if (i > 0)
                        sb.append(", ");
                    string(sb, names.get(i));
                }
                sb.append(']');
            }
        }
        catch (java.nio.BufferUnderflowException e)
        {
            throw new BadRecord("query options end before their values do");
        }
    }

    private static void hex(StringBuilder sb, byte[] bytes, int from, int len)
    {
        sb.append('"');
        for (int i = from; i < from + len; i++)
            sb.append(HEX[(bytes[i] >> 4) & 15]).append(HEX[bytes[i] & 15]);
        sb.append('"');
    }

    private static void string(StringBuilder sb, String s)
    {
        if (s == null)
        {
            sb.append("null");
            return;
        }
        sb.append('"');
        for (int i = 0; i < s.length(); i++)
        {
            char c = s.charAt(i);
            switch (c)
            {
                case '"': sb.append("\\\""); break;
                case '\\': sb.append("\\\\"); break;
                case '\n': sb.append("\\n"); break;
                case '\r': sb.append("\\r"); break;
                case '\t': sb.append("\\t"); break;
                default:
                    if (c < 0x20 || (c >= 0xd800 && c <= 0xdfff && !validSurrogate(s, i)))
                        sb.append(String.format("\\u%04x", (int) c));
                    else
                        sb.append(c);
            }
        }
        sb.append('"');
    }

    private static boolean validSurrogate(String s, int i)
    {
        char c = s.charAt(i);
        if (Character.isHighSurrogate(c))
            return i + 1 < s.length() && Character.isLowSurrogate(s.charAt(i + 1));
        return i > 0 && Character.isHighSurrogate(s.charAt(i - 1));
    }
}
