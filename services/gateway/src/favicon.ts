/**
 * /favicon.ico: a 32x32 icon (an ICO container holding one PNG image, as every current browser reads it).
 * Built once from the PNG below (a landscape on a blue tile, 533 bytes).
 */
const PNG_32 =
  'iVBORw0KGgoAAAANSUhEUgAAACAAAAAgCAMAAABEpIrGAAAAw1BMVEVMaXEvXYouXIsvXYkvXo0vXIgqVX8uXIkkbZEvXYouXIovXYkuXYouXYouXYkuXInf6fMvXYr0xUKHo7+Np8LqwEZGaILqv0a0o1pNbX+2pFjd6PKzolrnvkeyoltFaYKQq8SrwNQ3Y45pi6ySrMWuwtXR3uq7zN3H1uXG1uWetcs4ZI9TeZ8yYIy7zd5HcJjZ5e98mrjmvkdHcZk/apQwXopXfaLpvkYxX4vP3Ok+aZNdgaVtjq/W4u7a5vDlvUd/nbpZv/owAAAAEHRSTlMAx27IG2wGzwfzyfTQbfHGgSkxgwAAAAlwSFlzAAALEwAACxMBAJqcGAAAANxJREFUOMul08USwjAQgOFFauiG0BZ3d3d7/6ciwGSwZssM/yWHfDkkkwUAMxiKMo+iobgJonCMKTPC4jyxL4QJQUamQYQGAbBoYAHz6XfgZGw7l1UDZ5YSFR0lyKTuFZTAfgDXD6yVIPcAJSXIFm/75zJxzYLrlsr/PJTokqbBIY9pCuxPiFLw6TcYHBGl4Jivf4LxFlEKLpbJ6h0suijj/L605q+gP8KvOrsnGDbRo3ZNgmUPPatubkB82goqajCW8P/2cb/BMQ1y9HQxvAY9vAC6FvAcLyup6QBX+HtGJHwn/XQAAAAASUVORK5CYII=';

function icoOf(png: Buffer, size: number): Buffer {
  const header = Buffer.alloc(6 + 16);
  header.writeUInt16LE(0, 0); // reserved
  header.writeUInt16LE(1, 2); // type: icon
  header.writeUInt16LE(1, 4); // one image
  header.writeUInt8(size, 6); // width
  header.writeUInt8(size, 7); // height
  header.writeUInt8(0, 8); // no palette
  header.writeUInt8(0, 9); // reserved
  header.writeUInt16LE(1, 10); // colour planes
  header.writeUInt16LE(32, 12); // bits per pixel
  header.writeUInt32LE(png.length, 14); // image size
  header.writeUInt32LE(22, 18); // image offset
  return Buffer.concat([header, png]);
}

export const FAVICON_ICO: Buffer = icoOf(Buffer.from(PNG_32, 'base64'), 32);
