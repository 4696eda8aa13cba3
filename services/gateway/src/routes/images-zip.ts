import { Readable } from 'node:stream';
import { crc32 } from 'node:zlib';

/**
 * A streaming ZIP writer for POST /api/images/download: entries are STORED (images are compressed already),
 * read one after the other, with the CRC in a data descriptor after each entry (general purpose bit 3),
 * names in UTF-8 (bit 11). The total length is known up front from the entry sizes, so the response has a
 * Content-Length. No ZIP64: callers keep the archive under MAX_ZIP_BYTES.
 *
 * (yazl is a dependency of the library package, not of the gateway; this ~100-line writer avoids a new
 * gateway dependency and produces the same layout yazl does for `compress: false` read streams.)
 */
export const MAX_ZIP_BYTES = 0xffff_ffff - 64 * 1024 * 1024; // leave room for headers under the 4 GiB ZIP32 limit

export interface ZipEntry {
  name: string;
  size: number;
  mtime: Date;
  open(): Promise<AsyncIterable<Buffer | Uint8Array | string>>;
}

const LOCAL_HEADER = 30;
const DATA_DESCRIPTOR = 16;
const CENTRAL_HEADER = 46;
const EOCD = 22;
const FLAGS = 0x0008 | 0x0800;

function dosDateTime(d: Date): { time: number; date: number } {
  const year = Math.max(d.getUTCFullYear(), 1980);
  return {
    time: (d.getUTCHours() << 11) | (d.getUTCMinutes() << 5) | Math.floor(d.getUTCSeconds() / 2),
    date: ((year - 1980) << 9) | ((d.getUTCMonth() + 1) << 5) | d.getUTCDate(),
  };
}

export function zipSize(entries: { name: string; size: number }[]): number {
  let total = EOCD;
  for (const e of entries) {
    const n = Buffer.byteLength(e.name, 'utf8');
    total += LOCAL_HEADER + n + e.size + DATA_DESCRIPTOR + CENTRAL_HEADER + n;
  }
  return total;
}

export function zipStream(entries: ZipEntry[]): Readable {
  async function* generate() {
    const central: Buffer[] = [];
    let offset = 0;
    for (const e of entries) {
      const name = Buffer.from(e.name, 'utf8');
      const { time, date } = dosDateTime(e.mtime);
      const local = Buffer.alloc(LOCAL_HEADER);
      local.writeUInt32LE(0x04034b50, 0);
      local.writeUInt16LE(20, 4); // version needed
      local.writeUInt16LE(FLAGS, 6);
      local.writeUInt16LE(0, 8); // stored
      local.writeUInt16LE(time, 10);
      local.writeUInt16LE(date, 12);
      // crc32 and sizes 0: they follow in the data descriptor
      local.writeUInt16LE(name.length, 26);
      local.writeUInt16LE(0, 28);
      yield Buffer.concat([local, name]);

      let crc = 0;
      let size = 0;
      for await (const chunk of await e.open()) {
        const b = typeof chunk === 'string' ? Buffer.from(chunk) : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
        crc = crc32(b, crc);
        size += b.length;
        if (size > e.size) throw new Error(`zip entry ${e.name} is larger than announced`);
        yield b;
      }
      if (size !== e.size) throw new Error(`zip entry ${e.name} is ${size} bytes, announced ${e.size}`);

      const dd = Buffer.alloc(DATA_DESCRIPTOR);
      dd.writeUInt32LE(0x08074b50, 0);
      dd.writeUInt32LE(crc >>> 0, 4);
      dd.writeUInt32LE(size, 8);
      dd.writeUInt32LE(size, 12);
      yield dd;

      const c = Buffer.alloc(CENTRAL_HEADER);
      c.writeUInt32LE(0x02014b50, 0);
      c.writeUInt16LE((3 << 8) | 20, 4); // made by: unix, 2.0
      c.writeUInt16LE(20, 6);
      c.writeUInt16LE(FLAGS, 8);
      c.writeUInt16LE(0, 10);
      c.writeUInt16LE(time, 12);
      c.writeUInt16LE(date, 14);
      c.writeUInt32LE(crc >>> 0, 16);
      c.writeUInt32LE(size, 20);
      c.writeUInt32LE(size, 24);
      c.writeUInt16LE(name.length, 28);
      // extra, comment, disk, internal attributes: 0
      c.writeUInt32LE((0o100644 << 16) >>> 0, 38); // regular file, rw-r--r--
      c.writeUInt32LE(offset, 42);
      central.push(c, name);
      offset += LOCAL_HEADER + name.length + size + DATA_DESCRIPTOR;
    }
    const cd = Buffer.concat(central);
    const end = Buffer.alloc(EOCD);
    end.writeUInt32LE(0x06054b50, 0);
    end.writeUInt16LE(entries.length, 8);
    end.writeUInt16LE(entries.length, 10);
    end.writeUInt32LE(cd.length, 12);
    end.writeUInt32LE(offset, 16);
    yield Buffer.concat([cd, end]);
  }
  return Readable.from(generate(), { objectMode: false });
}
