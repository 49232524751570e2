// GEMM with subgroup broadcasts and wide loads: C[M,N] = A[M,K] * B[K,N], row-major, no workgroup memory.
// A workgroup owns a 64-row x 128-column tile of C; each of its 16 invocations keeps 64 rows x 8
// consecutive columns (two vec4) as accumulators. All invocations of a workgroup share the same rows,
// so A is not loaded by every invocation: per K quad, lane i of each subgroup loads rows i, i + 8, ...
// and subgroupBroadcast hands every row to every lane. Per invocation and K quad that is 8 loads of
// 4 values of A and 4 loads of 8 values of B for 512 vec4 FMAs.
// Tuned for CPU-class adapters (lavapipe, SwiftShader), where every storage load is a loop over the
// lanes of a SIMD register whose cost is per load, not per byte, and the accumulators live in the
// stack anyway: loads, not registers, are what to save. So A and B are read through 64-bit words
// (`Wide4`: 4 values of T, `Wide8`: 8, unpacked by the runner's prelude for T = f32 or f16) rather than
// vec4<T>: fewer loads for the same bytes. Needs the `shader-int64` feature for that.
// On GPUs with at most 255 registers per invocation, 512 accumulator floats spill: use gemm_vec4 there.
// Needs the `subgroup` feature and subgroups of at least 8 invocations (the runner measures the size;
// a narrower subgroup poisons the output with NaN so that the result check fails instead of lying).
// Accumulation is in f32 whatever the storage type T.
// The 64 accumulators, the 8 loads of A per K quad, the 64 steps and the 64 stores are `//! unroll`
// lines that the runner writes out as straight-line code (kernels.wgsl_source): llvmpipe does not unroll
// loops over constants, and the accumulators must be separate variables to stay out of scratch memory.
// Checked against a float64 reference: normwise relative error <= 1e-4 for f32, 2e-3 for f16 (of C).
// Bindings: 0 Params (M, N, K), 1 A and 2 B (read-only storage), 3 C; workgroup (16, 1, 1).
// Requires M % 64 == 0, N % 128 == 0, K % 4 == 0. Dispatch: (N / 128, M / 64, 1).

struct Params { M: u32, N: u32, K: u32, pad: u32 }

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> A4: array<Wide4>;
@group(0) @binding(2) var<storage, read> B8: array<Wide8>;
@group(0) @binding(3) var<storage, read_write> C4: array<vec4<T>>;

const WX = 16u;  // invocations along N; each owns 8 consecutive columns

struct Acc { lo: vec4<f32>, hi: vec4<f32> }

// Four consecutive rows of B (one K quad) at the invocation's 8 columns: l = the first 4, h = the next 4.
struct Panel {
    l0: vec4<f32>, l1: vec4<f32>, l2: vec4<f32>, l3: vec4<f32>,
    h0: vec4<f32>, h1: vec4<f32>, h2: vec4<f32>, h3: vec4<f32>,
}

fn load_panel(k: u32, N8: u32, co: u32) -> Panel {
    let w0 = B8[k * N8 + co];
    let w1 = B8[(k + 1u) * N8 + co];
    let w2 = B8[(k + 2u) * N8 + co];
    let w3 = B8[(k + 3u) * N8 + co];
    return Panel(
        wide8_lo(w0), wide8_lo(w1), wide8_lo(w2), wide8_lo(w3),
        wide8_hi(w0), wide8_hi(w1), wide8_hi(w2), wide8_hi(w3),
    );
}

fn step(c: Acc, a: vec4<f32>, b: Panel) -> Acc {
    var r = c;
    r.lo = fma(vec4(a.x), b.l0, r.lo);
    r.lo = fma(vec4(a.y), b.l1, r.lo);
    r.lo = fma(vec4(a.z), b.l2, r.lo);
    r.lo = fma(vec4(a.w), b.l3, r.lo);
    r.hi = fma(vec4(a.x), b.h0, r.hi);
    r.hi = fma(vec4(a.y), b.h1, r.hi);
    r.hi = fma(vec4(a.z), b.h2, r.hi);
    r.hi = fma(vec4(a.w), b.h3, r.hi);
    return r;
}

fn store(row: u32, N4: u32, co: u32, c: Acc) {
    C4[row * N4 + co * 2u] = vec4<T>(c.lo);
    C4[row * N4 + co * 2u + 1u] = vec4<T>(c.hi);
}

@compute @workgroup_size(16)
fn main(
    @builtin(local_invocation_id) lid: vec3<u32>,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(subgroup_invocation_id) sg_lane: u32,
    @builtin(subgroup_size) sg_size: u32,
) {
    let K4 = p.K / 4u;
    let N4 = p.N / 4u;
    let N8 = p.N / 8u;
    let row = wid.y * 64u;  // the same rows for the whole workgroup
    let co = wid.x * WX + lid.x;
    if (sg_size < 8u) {
        let poison = vec4<f32>(bitcast<f32>(0x7fc00000u));
        for (var r = 0u; r < 64u; r++) {
            store(row + r, N4, co, Acc(poison, poison));
        }
        return;
    }
    let lane = sg_lane & 7u;
    //! unroll i in 0..64: var c{i} = Acc(vec4<f32>(0.0), vec4<f32>(0.0));
    for (var kq = 0u; kq < K4; kq++) {
        //! unroll j in 0..8: let a{j} = wide4(A4[(row + {8 * j}u + lane) * K4 + kq]);
        let b = load_panel(kq * 4u, N8, co);
        //! unroll i in 0..64: c{i} = step(c{i}, subgroupBroadcast(a{i / 8}, {i % 8}u), b);
    }
    //! unroll i in 0..64: store(row + {i}u, N4, co, c{i});
}
