// Reads and writes the safetensors format (8-byte little-endian header length, JSON header,
// raw little-endian data) in plain JavaScript, for Node and browsers alike. Only what the tests
// and the bench need: F32, I64 and I32 to read, any dtype given as bytes to write.

const READERS = {
  F32: (bytes) => new Float32Array(aligned(bytes, 4)),
  I64: (bytes) => Array.from(new BigInt64Array(aligned(bytes, 8)), Number),
  I32: (bytes) => Array.from(new Int32Array(aligned(bytes, 4))),
};

// Typed arrays need their offset to be a multiple of the element size; copy when it is not.
function aligned(bytes, size) {
  return bytes.byteOffset % size === 0
    ? bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength)
    : bytes.slice().buffer;
}

/** Parses a safetensors file: `{ metadata, tensors: { name: { dtype, shape, data } } }`. */
export function parseSafetensors(file) {
  const bytes = file instanceof Uint8Array ? file : new Uint8Array(file);
  const headerLength = Number(new DataView(bytes.buffer, bytes.byteOffset, 8).getBigUint64(0, true));
  const header = JSON.parse(new TextDecoder().decode(bytes.subarray(8, 8 + headerLength)));
  const dataStart = 8 + headerLength;
  const { __metadata__: metadata = {}, ...entries } = header;
  const tensors = {};
  for (const [name, { dtype, shape, data_offsets: [begin, end] }] of Object.entries(entries)) {
    const read = READERS[dtype];
    if (!read) throw new Error(`tensor ${name}: dtype ${dtype} is not supported here`);
    tensors[name] = { dtype, shape, data: read(bytes.subarray(dataStart + begin, dataStart + end)) };
  }
  return { metadata, tensors };
}

/**
 * Lays out a safetensors file for `entries` (`[{ name, dtype, shape, byteLength }]`) and returns
 * the file with zeroed data plus where each tensor's bytes go, so large tensors can be filled in
 * place instead of being built separately and copied.
 */
export function allocateSafetensors(entries) {
  const header = {};
  let offset = 0;
  for (const { name, dtype, shape, byteLength } of entries) {
    header[name] = { dtype, shape, data_offsets: [offset, offset + byteLength] };
    offset += byteLength;
  }
  let json = JSON.stringify(header);
  json += ' '.repeat((8 - ((8 + json.length) % 8)) % 8); // keep the data 8-byte aligned
  const file = new Uint8Array(8 + json.length + offset);
  new DataView(file.buffer).setBigUint64(0, BigInt(json.length), true);
  file.set(new TextEncoder().encode(json), 8);
  const dataStart = 8 + json.length;
  const regions = Object.fromEntries(
    entries.map(({ name }) => [name, file.subarray(dataStart + header[name].data_offsets[0], dataStart + header[name].data_offsets[1])]),
  );
  return { file, regions };
}
