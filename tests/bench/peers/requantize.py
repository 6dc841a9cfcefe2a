"""Re-encodes a GGUF's Q4_1 matrices as another block type, for `npm run bench:peers`.

    python requantize.py IN.gguf OUT.gguf Q4_0|Q4_1|Q8_0

Only the package registries are reachable here, so the other quant types of SmolLM2 are made from
the one file the setup script fetches: each Q4_1 tensor is decoded to f32 and encoded as the
target type with gguf-py (llama.cpp's own Python reference of the block formats). Every other
tensor (norms in F32, the Q8_0 token embedding that is also the output matrix) and every metadata
field are copied as they are, except `general.file_type`, which names the new type. The numbers
differ from a conversion of the original weights, but both engines read the same file, which is
all a speed comparison needs. run.mjs calls this in a throwaway venv outside the repository
(~/.cache/gptlens/gguf-venv, gguf pinned there).
"""

import sys

import gguf
import numpy as np

# llama.cpp's LlamaFileType for a file whose matrices are mostly of that type.
FILE_TYPES = {"Q4_0": gguf.LlamaFileType.MOSTLY_Q4_0, "Q4_1": gguf.LlamaFileType.MOSTLY_Q4_1, "Q8_0": gguf.LlamaFileType.MOSTLY_Q8_0}


def main(source: str, target: str, type_name: str) -> None:
    if type_name not in FILE_TYPES:
        raise SystemExit(f"requantize.py: unknown type {type_name} (one of {', '.join(FILE_TYPES)})")
    new_type = gguf.GGMLQuantizationType[type_name]
    reader = gguf.GGUFReader(source)
    arch = reader.get_field(gguf.Keys.General.ARCHITECTURE).contents()
    writer = gguf.GGUFWriter(target, arch=arch, endianess=reader.endianess)
    alignment = reader.get_field(gguf.Keys.General.ALIGNMENT)
    if alignment is not None:
        writer.data_alignment = alignment.contents()

    for field in reader.fields.values():
        # The writer adds the architecture and the GGUF header fields itself.
        if field.name == gguf.Keys.General.ARCHITECTURE or field.name.startswith("GGUF."):
            continue
        if field.name == gguf.Keys.General.FILE_TYPE:
            writer.add_file_type(FILE_TYPES[type_name])
            continue
        value_type = field.types[0]
        sub_type = field.types[-1] if value_type == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(field.name, field.contents(), value_type, sub_type=sub_type)

    tensors = []
    for tensor in reader.tensors:
        data, tensor_type = tensor.data, tensor.tensor_type
        if tensor_type == gguf.GGMLQuantizationType.Q4_1 and tensor_type != new_type:
            weights = gguf.quants.dequantize(np.asarray(data), tensor_type)
            data, tensor_type = gguf.quants.quantize(weights, new_type), new_type
        tensors.append((tensor.name, data, tensor_type))
        writer.add_tensor_info(tensor.name, data.shape, data.dtype, data.nbytes, tensor_type)

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    for _, data, _ in tensors:
        writer.write_tensor_data(data)
    writer.close()


if __name__ == "__main__":
    if len(sys.argv) != 4:
        raise SystemExit(__doc__)
    main(*sys.argv[1:])
