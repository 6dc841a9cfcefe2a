//! Every kernel against the CPU code it replaces, on random data and on shapes that are not
//! multiples of the workgroup sizes (rows, tokens, widths, keys). Run natively (lavapipe here);
//! with `REQUIRE_GPU=1` a missing adapter is a failure.

use std::sync::Arc;

use half::{bf16, f16};

use super::{Kernel, Pipelines};
use crate::gpu::weights::GpuFormat;
use crate::gpu::Gpu;
use crate::kernels::packed::{self, PackedType};
use crate::kernels::quant::{dequantize_row, GgmlType};
use crate::kernels::{activation, attention, norm, rope};
use crate::model::RopePairing;
use crate::sample::Rng;

fn gpu() -> Option<Arc<Gpu>> {
    match pollster::block_on(Gpu::request()) {
        Ok(gpu) => Some(Arc::new(gpu)),
        Err(e) if std::env::var("REQUIRE_GPU").is_ok_and(|v| v == "1") => panic!("REQUIRE_GPU=1 but {e}"),
        Err(e) => {
            eprintln!("SKIPPED: {e}");
            None
        }
    }
}

fn bytes(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

fn words(values: &[u32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// Runs one dispatch of `kernel` with `params` and `buffers` bound after them (in order), and
/// returns the final contents of every buffer as f32.
fn dispatch(gpu: &Gpu, kernel: Kernel, params: &[u32], buffers: &[Vec<u8>], groups: (u32, u32, u32)) -> Vec<Vec<f32>> {
    use wgpu::util::DeviceExt;
    let device = &gpu.device;
    let pipelines = Pipelines::new(device, [kernel]);
    let pipeline = pipelines.get(kernel).unwrap();
    let mut uniform = words(params);
    uniform.resize(256, 0);
    let params = device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
        label: None,
        contents: &uniform,
        usage: wgpu::BufferUsages::UNIFORM,
    });
    let storage: Vec<wgpu::Buffer> = buffers
        .iter()
        .map(|b| {
            let mut contents = b.clone();
            contents.resize(contents.len().max(16).next_multiple_of(4), 0);
            device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
                label: None,
                contents: &contents,
                usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
            })
        })
        .collect();
    let mut entries = vec![wgpu::BindGroupEntry { binding: 0, resource: params.as_entire_binding() }];
    entries.extend(
        storage
            .iter()
            .enumerate()
            .map(|(i, b)| wgpu::BindGroupEntry { binding: i as u32 + 1, resource: b.as_entire_binding() }),
    );
    let bind_group = device.create_bind_group(&wgpu::BindGroupDescriptor {
        label: None,
        layout: &pipeline.layout,
        entries: &entries,
    });
    let mut encoder = device.create_command_encoder(&Default::default());
    {
        let mut pass = encoder.begin_compute_pass(&Default::default());
        pass.set_pipeline(&pipeline.pipeline);
        pass.set_bind_group(0, &bind_group, &[]);
        pass.dispatch_workgroups(groups.0, groups.1, groups.2);
    }
    let readable: Vec<wgpu::Buffer> = storage
        .iter()
        .map(|b| {
            let r = device.create_buffer(&wgpu::BufferDescriptor {
                label: None,
                size: b.size(),
                usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            });
            encoder.copy_buffer_to_buffer(b, 0, &r, 0, b.size());
            r
        })
        .collect();
    gpu.queue.submit([encoder.finish()]);
    readable
        .iter()
        .map(|r| {
            let raw = pollster::block_on(gpu.read(r, r.size())).unwrap();
            raw.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect()
        })
        .collect()
}

fn random(rng: &mut Rng, n: usize, scale: f32) -> Vec<f32> {
    (0..n).map(|_| (rng.next_f32() - 0.5) * 2.0 * scale).collect()
}

/// One random row of `cols` weights in the CPU's layout of `format`, and its f32 values as the
/// CPU decodes them.
fn random_row(format: GgmlType, cols: usize, rng: &mut Rng) -> (Vec<u8>, Vec<f32>) {
    let mut noise = |n: usize| -> Vec<u8> { (0..n).map(|_| rng.next_u64() as u8).collect() };
    let scale = |bytes: &mut [u8], at: usize, value: f32| {
        bytes[at..at + 2].copy_from_slice(&f16::from_f32(value).to_le_bytes())
    };
    let mut values = vec![0.0; cols];
    match format {
        GgmlType::F32 | GgmlType::F16 | GgmlType::BF16 => {
            let v: Vec<f32> = noise(cols).iter().map(|&b| (b as f32 - 127.5) / 64.0).collect();
            let stored: Vec<u8> = match format {
                GgmlType::F32 => bytes(&v),
                GgmlType::F16 => v.iter().flat_map(|&x| f16::from_f32(x).to_le_bytes()).collect(),
                _ => v.iter().flat_map(|&x| bf16::from_f32(x).to_le_bytes()).collect(),
            };
            dequantize_row(format, &stored, &mut values);
            (stored, values)
        }
        GgmlType::Q4_0 | GgmlType::Q4_1 | GgmlType::Q5_0 | GgmlType::Q5_1 | GgmlType::Q8_0 => {
            let Some(ty) = PackedType::of(format) else { unreachable!("{format:?} has a packed form") };
            let block = format.block_bytes();
            let mut file = noise(cols / 32 * block);
            for b in file.chunks_exact_mut(block) {
                scale(b, 0, 0.01 + (b[4] as f32) / 2550.0);
                if ty.has_min() {
                    scale(b, 2, -0.05 + (b[5] as f32) / 2550.0);
                }
            }
            let mut stored = Vec::new();
            packed::pack(format, &file, &mut stored);
            packed::dequantize_row(ty, &stored, &mut values);
            (stored, values)
        }
        GgmlType::Q4_K | GgmlType::Q5_K | GgmlType::Q6_K => {
            let (ty, scales_at) = match format {
                GgmlType::Q4_K => (GgmlType::Q4_K, &[0usize, 2][..]),
                GgmlType::Q5_K => (GgmlType::Q5_K, &[0, 2][..]),
                _ => (GgmlType::Q6_K, &[208][..]),
            };
            let block = ty.block_bytes();
            let mut stored = noise(cols / 256 * block);
            for b in stored.chunks_exact_mut(block) {
                for &at in scales_at {
                    scale(b, at, 0.001 + (b[20] as f32) / 25500.0);
                }
            }
            dequantize_row(ty, &stored, &mut values);
            (stored, values)
        }
    }
}

/// `out[t, r] = Σ W[r,k]·x[t,k] + b[r]` (and `+=` when accumulating) for every storage format,
/// with row counts, token counts and widths off the 8×8×8 tiling.
#[test]
fn matmul_matches_the_cpu_for_every_format() {
    let Some(gpu) = gpu() else { return };
    let mut rng = Rng::new(7);
    for format in GgmlType::ALL {
        let widths: &[usize] = match format {
            GgmlType::F32 | GgmlType::F16 | GgmlType::BF16 => &[37, 96],
            GgmlType::Q4_K | GgmlType::Q5_K | GgmlType::Q6_K => &[256, 512],
            _ => &[32, 160],
        };
        for &cols in widths {
            for (rows, n, accumulate) in [(13, 1, false), (70, 11, true)] {
                let mut stored = Vec::new();
                let mut w = Vec::new();
                for _ in 0..rows {
                    let (cpu_row, values) = random_row(format, cols, &mut rng);
                    format.push_row(&cpu_row, &mut stored);
                    w.extend(values);
                }
                let x = random(&mut rng, n * cols, 1.0);
                let bias = random(&mut rng, rows, 0.5);
                let (out_stride, out_offset) = (rows + 3, 2);
                let start = random(&mut rng, n * out_stride, 1.0);
                let params = [
                    rows as u32,
                    cols as u32,
                    n as u32,
                    format.row_words(cols) as u32,
                    0,
                    cols as u32,
                    out_offset as u32,
                    out_stride as u32,
                    0,
                    1,
                    accumulate as u32,
                ];
                let groups = (rows.div_ceil(8) as u32, 1, n.div_ceil(8) as u32);
                let result = dispatch(
                    &gpu,
                    Kernel::Matmul(format),
                    &params,
                    &[stored, bytes(&x), bytes(&bias), bytes(&start)],
                    groups,
                );
                let got = &result[3];
                for t in 0..n {
                    for r in 0..rows {
                        let dot: f64 = (0..cols).map(|k| f64::from(w[r * cols + k]) * f64::from(x[t * cols + k])).sum();
                        let magnitude: f64 =
                            (0..cols).map(|k| (f64::from(w[r * cols + k]) * f64::from(x[t * cols + k])).abs()).sum();
                        let o = t * out_stride + out_offset + r;
                        let want = dot + f64::from(bias[r]) + if accumulate { f64::from(start[o]) } else { 0.0 };
                        let err = (f64::from(got[o]) - want).abs();
                        assert!(
                            err <= 1e-5 * (magnitude + 1.0),
                            "{format:?} {rows}×{cols}, n {n}: [{t},{r}] {} vs {want}",
                            got[o]
                        );
                    }
                }
                // Columns outside the piece are left alone.
                assert_eq!(got[0], start[0], "{format:?}: wrote outside its columns");
            }
        }
    }
}

#[test]
fn norms_match_the_cpu() {
    let Some(gpu) = gpu() else { return };
    let mut rng = Rng::new(11);
    for (d, rows) in [(37, 3), (200, 5)] {
        let x = random(&mut rng, rows * d, 3.0).iter().map(|v| v + 1.5).collect::<Vec<_>>();
        let (weight, bias) = (random(&mut rng, d, 1.0), random(&mut rng, d, 1.0));
        for layer_norm in [true, false] {
            let eps = 1e-5f32;
            let params = [d as u32, 0, layer_norm as u32, eps.to_bits(), 0, rows as u32];
            let out = dispatch(
                &gpu,
                Kernel::Norm,
                &params,
                &[bytes(&x), bytes(&weight), bytes(&bias), vec![0; rows * d * 4], vec![0; 2 * rows * 4]],
                (rows as u32, 1, 1),
            );
            let (mut want, mut mean, mut scale) = (vec![0.0; rows * d], vec![0.0; rows], vec![0.0; rows]);
            if layer_norm {
                norm::layernorm(&mut want, &x, &weight, &bias, eps, &mut mean, &mut scale);
            } else {
                norm::rmsnorm(&mut want, &x, &weight, eps, &mut scale);
            }
            for i in 0..rows * d {
                assert!((out[3][i] - want[i]).abs() <= 1e-5 * want[i].abs().max(1.0), "d {d} {layer_norm}: {i}");
            }
            for r in 0..rows {
                assert!((out[4][rows + r] - scale[r]).abs() <= 1e-6 * scale[r], "scale");
                assert!((out[4][r] - mean[r]).abs() <= 1e-6 * mean[r].abs().max(1.0), "mean");
            }
        }
        let params = [d as u32, 0, 0, 0, 0, 0];
        let out = dispatch(
            &gpu,
            Kernel::ResidNorm,
            &params,
            &[bytes(&x), vec![], vec![], vec![], vec![0; rows * 4]],
            (rows as u32, 1, 1),
        );
        let mut want = vec![0.0; rows];
        norm::row_norms(&x, d, &mut want);
        for r in 0..rows {
            assert!((out[4][r] - want[r]).abs() <= 1e-6 * want[r], "residual norm");
        }
    }
}

#[test]
fn rope_and_kv_append_match_the_cpu() {
    let Some(gpu) = gpu() else { return };
    let mut rng = Rng::new(13);
    let (n_head, n_kv, hd, n, pos0) = (3, 1, 10, 5, 7);
    let (q_dim, kv_dim) = (n_head * hd, n_kv * hd);
    let qkv_dim = q_dim + 2 * kv_dim;
    for (pairing, code) in [(RopePairing::HalfSplit, 1), (RopePairing::Adjacent, 2)] {
        let qkv = random(&mut rng, n * qkv_dim, 1.0);
        let half = hd / 2;
        let (mut cos, mut sin) = (vec![0.0; n * half], vec![0.0; n * half]);
        for i in 0..n {
            rope::angles(pos0 + i, hd, 10000.0, &mut cos[i * half..(i + 1) * half], &mut sin[i * half..(i + 1) * half]);
        }
        let angles = [cos.clone(), sin.clone()].concat();
        let cache = vec![0u8; (pos0 + n) * kv_dim * 4];
        let params = [qkv_dim as u32, q_dim as u32, kv_dim as u32, hd as u32, pos0 as u32, code];
        let out = dispatch(
            &gpu,
            Kernel::Rope,
            &params,
            &[bytes(&qkv), bytes(&angles), cache.clone(), cache],
            (n as u32, 1, 1),
        );
        let mut want = qkv.clone();
        for i in 0..n {
            let row = &mut want[i * qkv_dim..(i + 1) * qkv_dim];
            rope::rotate(
                &mut row[..q_dim + kv_dim],
                hd,
                pairing,
                &cos[i * half..(i + 1) * half],
                &sin[i * half..(i + 1) * half],
            );
        }
        for i in 0..n * qkv_dim {
            assert!((out[0][i] - want[i]).abs() <= 1e-6, "{pairing:?} qkv {i}");
        }
        for i in 0..n {
            let at = (pos0 + i) * kv_dim;
            assert_eq!(&out[2][at..at + kv_dim], &out[0][i * qkv_dim + q_dim..i * qkv_dim + q_dim + kv_dim], "k cache");
            assert_eq!(&out[3][at..at + kv_dim], &out[0][i * qkv_dim + q_dim + kv_dim..(i + 1) * qkv_dim], "v cache");
        }
    }
}

/// Grouped-query causal attention, with more keys than a 64-key tile and a head size that is not
/// a multiple of 64, against `kernels::attention::attend`; sliding windows (one starting inside
/// the first tile, one shorter than the prompt) and a divisor other than √hd; the pattern is
/// written only on request.
#[test]
fn attention_matches_the_cpu() {
    let Some(gpu) = gpu() else { return };
    let mut rng = Rng::new(17);
    let cases = [(4, 2, 40, 3, 70, 0), (2, 2, 8, 9, 0, 0), (4, 2, 40, 3, 70, 70), (2, 1, 16, 9, 0, 4)];
    for (n_head, n_kv, hd, n, pos0, window) in cases {
        let divisor = if window == 0 { (hd as f32).sqrt() } else { 3.0 };
        let (q_dim, kv_dim) = (n_head * hd, n_kv * hd);
        let qkv_dim = q_dim + 2 * kv_dim;
        let qkv = random(&mut rng, n * qkv_dim, 2.0);
        let keys = random(&mut rng, (pos0 + n) * kv_dim, 2.0);
        let values = random(&mut rng, (pos0 + n) * kv_dim, 1.0);
        let pattern_len = n_head * (n * pos0 + n * (n + 1) / 2);
        for capture in [true, false] {
            let params = [
                n_head as u32,
                (n_head / n_kv) as u32,
                hd as u32,
                qkv_dim as u32,
                q_dim as u32,
                kv_dim as u32,
                pos0 as u32,
                capture as u32,
                0,
                window as u32,
                divisor.to_bits(),
            ];
            let out = dispatch(
                &gpu,
                Kernel::Attention,
                &params,
                &[bytes(&qkv), bytes(&keys), bytes(&values), vec![0; n * q_dim * 4], vec![0; pattern_len * 4]],
                (n_head as u32, n as u32, 1),
            );
            let mut at = 0;
            for t in 0..n {
                for h in 0..n_head {
                    let q = &qkv[t * qkv_dim + h * hd..t * qkv_dim + (h + 1) * hd];
                    let col = (h / (n_head / n_kv)) * hd;
                    let (mut probs, mut o) = (vec![0.0; pos0 + t + 1], vec![0.0; hd]);
                    let cache = attention::HeadCache { keys: &keys[col..], values: &values[col..], stride: kv_dim };
                    let first = if window > 0 { (pos0 + t + 1).saturating_sub(window) } else { 0 };
                    attention::attend(q, &cache, first..pos0 + t + 1, None, divisor, &mut probs, &mut o);
                    for (i, want) in o.iter().enumerate() {
                        assert!((out[3][t * q_dim + h * hd + i] - want).abs() <= 1e-5, "output [{t},{h},{i}]");
                    }
                    for (j, p) in probs.iter().enumerate() {
                        let got = out[4][at + j];
                        assert!(
                            if capture { (got - p).abs() <= 1e-6 } else { got == 0.0 },
                            "pattern [{t},{h},{j}] capture {capture}"
                        );
                    }
                    at += pos0 + t + 1;
                }
            }
        }
    }
}

#[test]
fn activations_match_the_cpu() {
    let Some(gpu) = gpu() else { return };
    let mut rng = Rng::new(19);
    let count = 1000; // not a multiple of the 256-wide workgroup
    let (up, gate) = (random(&mut rng, count, 12.0), random(&mut rng, count, 12.0));
    let groups = (count.div_ceil(256) as u32, 1, 1);
    let out = dispatch(&gpu, Kernel::Gelu, &[count as u32], &[bytes(&up), vec![]], groups);
    let mut want = up.clone();
    activation::gelu_new(&mut want);
    for i in 0..count {
        assert!(
            (out[0][i] - want[i]).abs() <= 2e-6 * want[i].abs().max(1.0),
            "gelu({}) = {} vs {}",
            up[i],
            out[0][i],
            want[i]
        );
    }
    // The gate's activation agrees within 2e-6 (absolute, or relative past 1) as above; `up`
    // scales that error.
    type Gated = fn(&[f32], &mut [f32]);
    let gated: [(Kernel, Gated); 2] =
        [(Kernel::SiluMul, activation::silu_mul), (Kernel::GeluMul, activation::gelu_mul)];
    for (kernel, cpu) in gated {
        let out = dispatch(&gpu, kernel, &[count as u32], &[bytes(&up), bytes(&gate)], groups);
        let mut want = up.clone();
        cpu(&gate, &mut want);
        for i in 0..count {
            let tolerance = 2e-6 * want[i].abs().max(up[i].abs()).max(1.0);
            assert!((out[0][i] - want[i]).abs() <= tolerance, "{kernel:?}: {} vs {}", out[0][i], want[i]);
        }
    }
}
