/*
 * Reads a Cassandra full query log (the chronicle-queue directory `nodetool enablefullquerylog` writes) and prints
 * one JSON object per record on standard output, for tailtune's `cassandra-fql` reader
 * (ingest/formats/cassandra_fql/binlog.py). Compiled against the cassandra-all jars (their chronicle-queue reads
 * the log; FullQueryLogger and BinLog name its fields): `python -m ingest.formats.cassandra_fql.binlog build`.
 *
 * Usage: java -cp <classes>:<cassandra lib>/* FqlReader DIR [ROLL_CYCLE]   (the roll cycle: the log's own)
 *
 * A record (docs/formats.md § cassandra-fql):
 *   {"record": N, "type": "single-query"|"batch", "start_ms": ..., "protocol": ..., "keyspace": ...|null,
 *    "query": "...", "values": [V, ...]}                                   (single-query)
 *   {..., "batch_type": "LOGGED", "queries": ["...", ...], "batch_values": [[V, ...], ...]}   (batch)
 * V is the bound value in hex, null for a null value, "unset" for an unset one; "names" lists the value names
 * when the client bound values by name. N counts records from 1 in the order the log holds them. A record that
 * cannot be read ends the output with {"error": "...", "record": N} and exit status 3.
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

import net.openhft.chronicle.queue.ChronicleQueue;
import net.openhft.chronicle.queue.ExcerptTailer;
import net.openhft.chronicle.queue.RollCycles;
import net.openhft.chronicle.queue.impl.single.SingleChronicleQueueBuilder;
import net.openhft.chronicle.wire.DocumentContext;
import net.openhft.chronicle.wire.ValueIn;
import net.openhft.chronicle.wire.WireIn;
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
        long record = 0;
        int status = 0;
        SingleChronicleQueueBuilder builder = SingleChronicleQueueBuilder.single(dir).readOnly(true);
        if (args.length == 2)
            builder.rollCycle(RollCycles.valueOf(args[1]));
        try (ChronicleQueue queue = builder.build())
        {
            ExcerptTailer tailer = queue.createTailer();
            StringBuilder line = new StringBuilder(256);
            while (true)
            {
                try (DocumentContext dc = tailer.readingDocument())
                {
                    if (!dc.isPresent())
                        break;
                    if (dc.isMetaData())
                        continue;
                    record++;
                    line.setLength(0);
                    readRecord(dc.wire(), record, line);
                    out.append(line).append('\n');
                }
            }
        }
        catch (BadRecord e)
        {
            status = 3;
            error(out, "cannot read the record: " + e.getMessage(), record);
        }
        catch (Throwable e) // chronicle throws checked exceptions it does not declare (a damaged file)
        {
            status = 3;
            error(out, "cannot read the log: " + e, record);
        }
        out.flush();
        stdout.flush();
        System.exit(status);
    }

    private static void error(Writer out, String message, long record) throws IOException
    {
        StringBuilder sb = new StringBuilder();
        sb.append("{\"error\": ");
        string(sb, message);
        sb.append(", \"record\": ").append(record).append('}');
        out.append(sb).append('\n');
    }

    private static void readRecord(WireIn wire, long record, StringBuilder sb)
    {
        StringBuilder name = new StringBuilder();
        sb.append("{\"record\": ").append(record);
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
