"""Writes the committed seed corpora of crate/fuzz/corpus/{gguf,safetensors} from the test fixtures:
tiny one-layer GPT-2 and LLaMA checkpoints (every weight format the loaders read), small so that
libFuzzer mutates them quickly.  Run from crate/fuzz:  python3 make_seeds.py"""
import json, random, struct
def rd(b, o, fmt):
    v = struct.unpack_from('<'+fmt, b, o); return v[0], o+struct.calcsize(fmt)
SIZES={0:'B',1:'b',2:'H',3:'h',4:'I',5:'i',6:'f',7:'?',10:'Q',11:'q',12:'d'}
def rstr(b,o):
    n,o=rd(b,o,'Q'); return b[o:o+n], o+n
def rval(b,o,t):
    if t==8: return rstr(b,o)
    if t==9:
        et,o=rd(b,o,'I'); n,o=rd(b,o,'Q'); items=[]
        for _ in range(n):
            v,o=rval(b,o,et); items.append(v)
        return (et,items),o
    return rd(b,o,SIZES[t])
def read(path):
    b=open(path,'rb').read()
    o=8; nt,o=rd(b,o,'Q'); nkv,o=rd(b,o,'Q'); kv=[]
    for _ in range(nkv):
        k,o=rstr(b,o); t,o=rd(b,o,'I'); v,o=rval(b,o,t); kv.append((k.decode(),t,v))
    tensors=[]
    for _ in range(nt):
        name,o=rstr(b,o); nd,o=rd(b,o,'I'); ne=[]
        for _ in range(nd):
            x,o=rd(b,o,'Q'); ne.append(x)
        ty,o=rd(b,o,'I'); off,o=rd(b,o,'Q'); tensors.append((name.decode(),ne,ty))
    return kv,tensors

# ---- GGUF seeds: the fixtures' metadata, one block, small widths, every weight type -------------
BLOCK = {0:(1,4), 1:(1,2), 30:(1,2), 2:(32,18), 3:(32,20), 8:(32,34)}
def wstr(s): s = s if isinstance(s, bytes) else s.encode(); return struct.pack('<Q', len(s)) + s
def wval(t, v):
    if t == 8: return wstr(v)
    if t == 9:
        et, items = v
        return struct.pack('<IQ', et, len(items)) + b''.join(wval(et, x) for x in items)
    return struct.pack('<' + {0:'B',1:'b',2:'H',3:'h',4:'I',5:'i',6:'f',7:'?',10:'Q',11:'q',12:'d'}[t], v)
def write(path, kv, tensors, seed=1):
    rng = random.Random(seed)
    out = b'GGUF' + struct.pack('<IQQ', 3, len(tensors), len(kv))
    for k, t, v in kv: out += wstr(k) + struct.pack('<I', t) + wval(t, v)
    datas, off = [], 0
    for name, ne, ty in tensors:
        per, size = BLOCK[ty]; n = 1
        for x in ne: n *= x
        data = bytes(rng.randrange(0, 64) for _ in range(n // per * size))
        out += wstr(name) + struct.pack('<I', len(ne)) + b''.join(struct.pack('<Q', x) for x in ne) + struct.pack('<IQ', ty, off)
        datas.append(data); off += (len(data) + 31) // 32 * 32
    out += b'\0' * (-len(out) % 32)
    for d in datas: out += d + b'\0' * (-len(d) % 32)
    open(path, 'wb').write(out)
def override(kv, arch, values):
    return [(k, t, values.get(k.split(arch + '.', 1)[-1], v) if k.startswith(arch + '.') else v) for k, t, v in kv]
root, out = "../../tests/fixtures", "corpus"
kv, _ = read(f'{root}/llama-tiny-q/model.gguf')
kv = override(kv, 'llama', {'block_count': 1, 'embedding_length': 32, 'feed_forward_length': 32, 'attention.head_count': 2, 'attention.head_count_kv': 1, 'rope.dimension_count': 16, 'context_length': 16})
d, f, v = 32, 32, 16
kv = [x for x in kv if not x[0].startswith('tokenizer.')]
write(f'{out}/gguf/llama-tiny-mixed.gguf', kv, [
    ('token_embd.weight', [d, v], 2), ('output_norm.weight', [d], 0),
    ('blk.0.attn_norm.weight', [d], 0), ('blk.0.attn_q.weight', [d, d], 2), ('blk.0.attn_k.weight', [d, 16], 3),
    ('blk.0.attn_v.weight', [d, 16], 8), ('blk.0.attn_output.weight', [d, d], 1), ('blk.0.ffn_norm.weight', [d], 0),
    ('blk.0.ffn_gate.weight', [d, f], 30), ('blk.0.ffn_up.weight', [d, f], 0), ('blk.0.ffn_down.weight', [f, d], 2)])
kv, _ = read(f'{root}/gpt2-tiny-gguf/model.gguf')
kv = override(kv, 'gpt2', {'block_count': 1, 'embedding_length': 32, 'feed_forward_length': 32, 'attention.head_count': 2, 'context_length': 4})
v = 16
kv_tok = kv
kv = [x for x in kv if not x[0].startswith('tokenizer.')]
t = [('token_embd.weight', [d, v], 8), ('position_embd.weight', [d, 4], 0), ('output_norm.weight', [d], 0), ('output_norm.bias', [d], 0)]
for name, rows, cols in [('attn_qkv', 3 * d, d), ('attn_output', d, d), ('ffn_up', f, d), ('ffn_down', d, f)]:
    t += [(f'blk.0.{name}.weight', [cols, rows], 1), (f'blk.0.{name}.bias', [rows], 0)]
for name in ['attn_norm', 'ffn_norm']:
    t += [(f'blk.0.{name}.weight', [d], 0), (f'blk.0.{name}.bias', [d], 0)]
write(f'{out}/gguf/gpt2-tiny-small.gguf', kv, t)
write(f'{out}/gguf/gpt2-metadata-only.gguf', kv_tok, [])
import json
out = "corpus"
rng = random.Random(2)  # the safetensors seeds
def st(tensors):
    header, data = {}, b''
    for name, dtype, shape in tensors:
        n = 1
        for s in shape: n *= s
        size = {'F32': 4, 'F16': 2, 'BF16': 2}[dtype]
        if dtype == 'F32': blob = b''.join(struct.pack('<f', rng.uniform(-0.1, 0.1)) for _ in range(n))
        else: blob = bytes(rng.randrange(0, 60) if i % 2 else rng.randrange(256) for i in range(n * size))
        header[name] = {'dtype': dtype, 'shape': shape, 'data_offsets': [len(data), len(data) + len(blob)]}
        data += blob
    h = json.dumps(header, separators=(',', ':')).encode()
    h += b' ' * (-len(h) % 8)
    return struct.pack('<Q', len(h)) + h + data
def seed(name, config, tensors):
    c = json.dumps(config).encode()
    open(f'{out}/safetensors/{name}', 'wb').write(struct.pack('<H', len(c)) + c + st(tensors))
d, f, v, ctx = 8, 16, 16, 4
gpt2 = [('wte.weight', 'F16', [v, d]), ('wpe.weight', 'F32', [ctx, d]), ('ln_f.weight', 'F32', [d]), ('ln_f.bias', 'F32', [d])]
for p, (rows, cols) in {'attn.c_attn': (3 * d, d), 'attn.c_proj': (d, d), 'mlp.c_fc': (f, d), 'mlp.c_proj': (d, f)}.items():
    gpt2 += [(f'h.0.{p}.weight', 'BF16', [cols, rows]), (f'h.0.{p}.bias', 'F32', [rows])]
gpt2 += [(f'h.0.{n}.{w}', 'F32', [d]) for n in ['ln_1', 'ln_2'] for w in ['weight', 'bias']]
seed('gpt2-tiny.bin', {'model_type': 'gpt2', 'n_layer': 1, 'n_head': 2, 'n_embd': d, 'n_inner': f, 'vocab_size': v, 'n_positions': ctx, 'eos_token_id': 0}, gpt2)
llama = [('model.embed_tokens.weight', 'F16', [v, d]), ('model.norm.weight', 'F32', [d]), ('lm_head.weight', 'BF16', [v, d])]
for p, (rows, cols) in {'self_attn.q_proj': (d, d), 'self_attn.k_proj': (4, d), 'self_attn.v_proj': (4, d), 'self_attn.o_proj': (d, d), 'mlp.gate_proj': (f, d), 'mlp.up_proj': (f, d), 'mlp.down_proj': (d, f)}.items():
    llama.append((f'model.layers.0.{p}.weight', 'F32' if 'proj' in p and 'mlp' in p else 'F16', [rows, cols]))
llama += [(f'model.layers.0.{n}.weight', 'F32', [d]) for n in ['input_layernorm', 'post_attention_layernorm']]
seed('llama-tiny.bin', {'model_type': 'llama', 'hidden_size': d, 'intermediate_size': f, 'num_hidden_layers': 1, 'num_attention_heads': 2, 'num_key_value_heads': 1, 'vocab_size': v, 'max_position_embeddings': ctx, 'rms_norm_eps': 1e-5, 'rope_theta': 10000.0, 'tie_word_embeddings': False}, llama)
