//! Training against PyTorch (`tests/fixtures/train/make_train_fixtures.py`): a tiny GPT-2 and its
//! sinusoidal-position variant, a fixed batch.
//!
//! Tolerances: the loss within 1e-5; every parameter's gradient within 1e-4 relative (to the
//! tensor's largest |value|) or 1e-6 absolute; the parameters after three AdamW steps (and after a
//! clipped step) within 1e-6 absolute — except the key biases, whose exact gradient is 0 (softmax
//! ignores a shift of a row's scores) and whose float32 gradient is rounding noise that AdamW
//! amplifies to ~lr in PyTorch and here alike; the schedule within 1e-7.

mod common;

use common::{ids, reference_from_bytes, RefTensor};
use gptlens::train::{scheduled_lr, AdamW, Trainer};
use std::collections::BTreeMap;

fn fixture(model: &str) -> (Trainer, BTreeMap<String, RefTensor>) {
    #[cfg(not(target_arch = "wasm32"))]
    let (ckpt, reference) = (
        common::load(&format!("train/{model}")),
        reference_from_bytes(&std::fs::read(common::fixture(&format!("train/{model}/reference.safetensors"))).unwrap()),
    );
    #[cfg(target_arch = "wasm32")]
    let (ckpt, reference) = wasm_fixture(model);
    (Trainer::from_model(&ckpt.model).unwrap(), reference)
}

#[cfg(target_arch = "wasm32")]
fn wasm_fixture(model: &str) -> (gptlens::Checkpoint, BTreeMap<String, RefTensor>) {
    macro_rules! files {
        ($m:literal) => {
            (
                &include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/train/", $m, "/config.json"))[..],
                &include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/train/", $m, "/model.safetensors"))[..],
                &include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/train/", $m, "/reference.safetensors"))[..],
            )
        };
    }
    let (config, weights, reference) = if model == "gpt2" { files!("gpt2") } else { files!("sinusoidal") };
    let files: BTreeMap<String, &[u8]> =
        [("config.json".to_string(), config), ("model.safetensors".to_string(), weights)].into_iter().collect();
    (gptlens::Checkpoint::from_files(&files).unwrap(), reference_from_bytes(reference))
}

/// Inputs and targets of the fixture's batch: `tokens[:, :-1]` and `tokens[:, 1:]`.
fn batch(reference: &BTreeMap<String, RefTensor>) -> (Vec<u32>, Vec<u32>, usize) {
    let tokens = &reference["tokens"];
    let (rows, t) = (tokens.shape[0], tokens.shape[1]);
    let all = ids(tokens);
    let rows_of = |skip: usize| all.chunks(t).flat_map(|row| row[skip..skip + t - 1].to_vec()).collect();
    (rows_of(0), rows_of(1), rows)
}

/// Whether element `i` of `name` is a key bias (`c_attn.bias[d..2d]`), whose updates are noise.
fn is_key_bias(name: &str, i: usize, d: usize) -> bool {
    name.ends_with("attn.c_attn.bias") && (d..2 * d).contains(&i)
}

fn check_gradients(model: &str) {
    let (mut trainer, reference) = fixture(model);
    let (inputs, targets, rows) = batch(&reference);
    let loss = trainer.loss_and_grads(&inputs, &targets, rows).unwrap();
    assert!((loss - reference["loss"].data[0]).abs() <= 1e-5, "{model}: loss {loss} vs {}", reference["loss"].data[0]);
    let names: Vec<String> = trainer.layout().tensors.iter().map(|t| t.name.clone()).collect();
    let expected: Vec<&str> = reference.keys().filter_map(|k| k.strip_prefix("grad.")).collect();
    assert_eq!(
        names.iter().map(String::as_str).collect::<std::collections::BTreeSet<_>>(),
        expected.into_iter().collect(),
        "{model}: the trained parameters are PyTorch's"
    );
    for name in &names {
        let got = trainer.grad(name).unwrap();
        let want = &reference[&format!("grad.{name}")].data;
        let largest = want.iter().fold(0f32, |m, x| m.max(x.abs()));
        for (i, (g, w)) in got.iter().zip(want).enumerate() {
            let off = (g - w).abs();
            assert!(off <= 1e-6 || off <= 1e-4 * largest, "{model} grad {name}[{i}]: {g} vs PyTorch {w}");
        }
    }
}

fn check_params(model: &str, trainer: &Trainer, reference: &BTreeMap<String, RefTensor>, prefix: &str) {
    let d = trainer.config().d_model;
    for t in &trainer.layout().tensors {
        let got = trainer.param(&t.name).unwrap();
        let want = &reference[&format!("{prefix}{}", t.name)].data;
        for (i, (p, w)) in got.iter().zip(want).enumerate() {
            if !is_key_bias(&t.name, i, d) {
                assert!((p - w).abs() <= 1e-6, "{model} {prefix}{}[{i}]: {p} vs PyTorch {w}", t.name);
            }
        }
    }
}

fn check_adamw(model: &str) {
    let (mut trainer, reference) = fixture(model);
    let (inputs, targets, rows) = batch(&reference);
    for step in 0..3 {
        let loss = trainer.loss_and_grads(&inputs, &targets, rows).unwrap();
        let want = reference[&format!("loss_step.{step}")].data[0];
        assert!((loss - want).abs() <= 1e-5, "{model} step {step}: loss {loss} vs PyTorch {want}");
        trainer.adamw_step(&AdamW::default(), 1e-2);
    }
    check_params(model, &trainer, &reference, "after3.");

    let (mut clipped, _) = fixture(model);
    clipped.loss_and_grads(&inputs, &targets, rows).unwrap();
    let norm = clipped.clip_grad_norm(0.5);
    let want = reference["clip.grad_norm"].data[0];
    assert!((norm - want).abs() <= 1e-5 * want, "{model}: gradient norm {norm} vs PyTorch {want}");
    for t in &clipped.layout().tensors {
        let (got, want) = (clipped.grad(&t.name).unwrap(), &reference[&format!("clip.grad.{}", t.name)].data);
        for (i, (g, w)) in got.iter().zip(want).enumerate() {
            assert!((g - w).abs() <= 1e-6, "{model} clipped grad {}[{i}]: {g} vs PyTorch {w}", t.name);
        }
    }
    clipped.adamw_step(&AdamW::default(), 1e-2);
    check_params(model, &clipped, &reference, "clip.after1.");
}

#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
#[cfg_attr(not(target_arch = "wasm32"), test)]
fn gpt2_gradients_match_pytorch() {
    check_gradients("gpt2");
}

#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
#[cfg_attr(not(target_arch = "wasm32"), test)]
fn sinusoidal_gradients_match_pytorch() {
    check_gradients("sinusoidal");
}

#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
#[cfg_attr(not(target_arch = "wasm32"), test)]
fn gpt2_adamw_steps_match_pytorch() {
    check_adamw("gpt2");
}

#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
#[cfg_attr(not(target_arch = "wasm32"), test)]
fn sinusoidal_adamw_steps_match_pytorch() {
    check_adamw("sinusoidal");
}

#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
#[cfg_attr(not(target_arch = "wasm32"), test)]
fn the_schedule_is_nanogpts() {
    let (_, reference) = fixture("gpt2");
    for (it, &want) in reference["schedule"].data.iter().enumerate() {
        let got = scheduled_lr(it, 3, 10, 1e-2, 1e-3);
        assert!((got - want).abs() <= 1e-7, "step {it}: {got} vs {want}");
    }
}

/// A central finite difference of the loss agrees with the gradient on a few parameters of each
/// kind (f64 would be exact; f32 with ε = 1e-2 agrees to a few percent).
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
#[cfg_attr(not(target_arch = "wasm32"), test)]
fn gradients_agree_with_finite_differences() {
    let (mut trainer, reference) = fixture("gpt2");
    let (inputs, targets, rows) = batch(&reference);
    trainer.loss_and_grads(&inputs, &targets, rows).unwrap();
    agrees_with_finite_differences(&mut trainer, &|t| t.loss(&inputs, &targets, rows).unwrap());
}

/// The gradient `trainer` holds agrees with central differences of `loss` (ε = 1e-2, within 5 %)
/// on a parameter of each kind: an MLP matrix, a norm, the (tied) embedding, q|k|v, a position.
fn agrees_with_finite_differences(trainer: &mut Trainer, loss: &dyn Fn(&mut Trainer) -> f32) {
    for (name, i) in [
        ("transformer.h.1.mlp.c_fc.weight", 37),
        ("transformer.h.0.ln_1.weight", 3),
        ("transformer.wte.weight", 100),
        ("transformer.h.0.attn.c_attn.weight", 5),
        ("transformer.wpe.weight", 20),
    ] {
        let analytic = trainer.grad(name).unwrap()[i];
        let eps = 1e-2;
        let mut at = |delta: f32| {
            trainer.nudge(name, i, delta);
            let value = loss(trainer);
            trainer.nudge(name, i, -delta);
            value
        };
        let numeric = (at(eps) - at(-eps)) / (2.0 * eps);
        assert!(
            (numeric - analytic).abs() <= 0.05 * analytic.abs().max(1e-3),
            "{name}[{i}]: analytic {analytic} vs numeric {numeric}"
        );
        // A `loss` that recomputes gradients left them at the last nudge: back to the point.
        loss(trainer);
    }
}

#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
#[cfg_attr(not(target_arch = "wasm32"), test)]
fn bad_batches_are_errors() {
    let (mut trainer, _) = fixture("gpt2");
    assert!(trainer.loss_and_grads(&[1, 2, 3], &[1, 2, 3], 2).is_err());
    assert!(trainer.loss_and_grads(&[1, 2], &[1], 1).is_err());
    assert!(trainer.loss_and_grads(&[1, 64], &[1, 2], 1).is_err());
    assert!(trainer.loss_and_grads(&[1; 17], &[1; 17], 1).is_err(), "past the context of 16");
}

/// Dropout: with p = 0 the pass is the plain one, bit for bit; with p = 0.3 the gradient is the
/// gradient of the loss under the same masks (central finite differences), the masks depend only
/// on the seed, and evaluation never drops.
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
#[cfg_attr(not(target_arch = "wasm32"), test)]
fn dropout_is_the_gradient_of_the_dropped_loss() {
    let (mut trainer, reference) = fixture("gpt2");
    let (inputs, targets, rows) = batch(&reference);
    let plain = trainer.loss_and_grads(&inputs, &targets, rows).unwrap();
    let plain_grad = trainer.grad("transformer.h.0.attn.c_attn.weight").unwrap();
    assert_eq!(trainer.loss_and_grads_with_dropout(&inputs, &targets, rows, 0.0, 7).unwrap(), plain);
    assert_eq!(trainer.grad("transformer.h.0.attn.c_attn.weight").unwrap(), plain_grad);
    let dropped = trainer.loss_and_grads_with_dropout(&inputs, &targets, rows, 0.3, 7).unwrap();
    assert_ne!(dropped, plain);
    assert_eq!(trainer.loss(&inputs, &targets, rows).unwrap(), plain, "evaluation does not drop");
    trainer.loss_and_grads_with_dropout(&inputs, &targets, rows, 0.3, 7).unwrap();
    agrees_with_finite_differences(&mut trainer, &|t| {
        t.loss_and_grads_with_dropout(&inputs, &targets, rows, 0.3, 7).unwrap()
    });
    assert!(trainer.loss_and_grads_with_dropout(&inputs, &targets, rows, 1.0, 7).is_err());
}

/// Sizes past the memory budget are refused before anything large is allocated: a shape whose
/// parameters alone do not fit, and a batch whose pass does not.
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
#[cfg_attr(not(target_arch = "wasm32"), test)]
fn absurd_sizes_are_refused_before_allocating() {
    use gptlens::train::recipe::Shape;
    // 3.2 billion parameters: 51 GB with gradients and moments (the count still fits wasm32's usize).
    let huge = Shape { n_layer: 16, n_head: 32, d_model: 4096, n_ctx: 4096, sinusoidal: false };
    let err =
        Trainer::new_random(&huge.config().unwrap(), 1).err().expect("a 3-billion-parameter model must not start");
    assert!(err.to_string().contains("training"), "{err}");
    let (mut trainer, _) = fixture("gpt2");
    let rows = 1 << 18; // 4 M positions: ~25 GB of activations for this model, past any default budget
    let ids = vec![1u32; rows * 16];
    let err = trainer.loss_and_grads(&ids, &ids, rows).unwrap_err().to_string();
    assert!(err.contains("training"), "{err}");
}

/// The model gptlens trained and ships (`assets/models/gptlens-shakespeare`) behaves under gptlens
/// as under PyTorch (`tests/fixtures/train/make_shipped_reference.py`, transformers'
/// GPT2LMHeadModel on the same folder): the mean loss over 16 windows of held-out text — through
/// the training pass, which measured the card's figure — within 1e-5, and all 256 next-byte
/// probabilities after the page's opening prompt — through an inference session — within 1e-6.
#[cfg(not(target_arch = "wasm32"))]
#[test]
fn the_shipped_model_is_pytorchs() {
    use gptlens::{CaptureSpec, Session};
    let folder = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../assets/models/gptlens-shakespeare");
    let checkpoint = gptlens::Checkpoint::open(&folder).unwrap();
    let reference: serde_json::Value =
        serde_json::from_slice(&std::fs::read(common::fixture("train/shipped/reference.json")).unwrap()).unwrap();
    let bytes: Vec<u32> =
        reference["held_out_bytes"].as_array().unwrap().iter().map(|b| b.as_u64().unwrap() as u32).collect();
    let t = reference["context"].as_u64().unwrap() as usize;
    let windows = (bytes.len() - 1) / t;
    let mut trainer = Trainer::from_model(&checkpoint.model).unwrap();
    let loss = trainer.loss(&bytes[..windows * t], &bytes[1..windows * t + 1], windows).unwrap();
    let want = reference["held_out_loss"].as_f64().unwrap();
    assert!((f64::from(loss) - want).abs() <= 1e-5, "held-out loss {loss} vs PyTorch's {want}");

    let prompt: Vec<u32> = reference["prompt"].as_str().unwrap().bytes().map(u32::from).collect();
    let trace = Session::new(checkpoint.model.clone()).run(&prompt, &CaptureSpec::none()).unwrap();
    let probs = trace.probs(prompt.len() - 1, 1.0).unwrap();
    let want: Vec<f64> = reference["next_byte_probs"].as_array().unwrap().iter().map(|p| p.as_f64().unwrap()).collect();
    let worst = probs.iter().zip(&want).map(|(a, b)| (f64::from(*a) - b).abs()).fold(0.0, f64::max);
    assert!(worst <= 1e-6, "next-byte probabilities differ by {worst}");
}

/// Every reduction has a fixed order whatever the thread count, so training gives the same bits
/// on one thread and on three (the shipped model's card and `npm run train` rely on it): two
/// clipped AdamW steps, parameters compared bit for bit.
#[cfg(not(target_arch = "wasm32"))]
#[test]
fn training_gives_the_same_bits_on_any_number_of_threads() {
    let trained_on = |threads: usize| {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
        let (mut trainer, reference) = fixture("gpt2");
        let (inputs, targets, rows) = batch(&reference);
        for _ in 0..2 {
            pool.install(|| gptlens::kernels::pool::run_as_team(|| trainer.loss_and_grads(&inputs, &targets, rows)))
                .unwrap();
            trainer.clip_grad_norm(0.5);
            trainer.adamw_step(&AdamW::default(), 1e-2);
        }
        trainer.to_safetensors().unwrap()
    };
    assert!(trained_on(1) == trained_on(3), "the parameters differ between 1 and 3 threads");
}
