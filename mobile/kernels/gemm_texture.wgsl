// GEMM reading A and B from read-only storage textures: C[M,N] = A[M,K] * B[K,N], row-major.
// A and B are 2D textures of 4-value texels in the matrices' own row-major order (A: K/4 texels wide,
// M rows; B: N/4 wide, K rows), the image path that mobile inference libraries use for weights and
// activations (OpenCL image2d on Adreno and Mali, Metal textures). The runner declares the format with
// `InTex` (rgba32float for f32, rgba16float for f16); texels come back as vec4<f32> either way.
// Shape as gemm_subgroup: a workgroup owns a 64-row x 128-column tile of C, each of its 16 invocations
// 64 rows x 8 consecutive columns (two vec4 accumulators per row); per K quad, lane i of each subgroup
// fetches rows i, i + 8, ... of A and subgroupBroadcast hands every row to every lane: 8 texel loads
// of A and 8 of B per invocation for 512 vec4 FMAs.
// Why textures: lavapipe (llvmpipe) builds a storage-buffer load inside a loop as a loop over the SIMD
// lanes with a branch and a bounds check per lane and component, but a texel fetch as 8 straight
// 16-byte loads and a transpose (mobile/README.md has what that gains).
// Workgroup order: pairs of consecutive workgroups share a column stripe of B (two row blocks of one
// stripe, then the next stripe) instead of one row block of A: lavapipe hands consecutive workgroups to
// its threads in turn, so both cores stream the same lines of B at once.
// Needs the `subgroup` feature and subgroups of at least 8 invocations (the runner measures the size;
// a narrower subgroup poisons the output with NaN so that the result check fails instead of lying).
// Accumulation is in f32 whatever the storage type T of C.
// The 64 accumulators, the 8 loads of A per K quad, the 64 steps and the 64 stores are `//! unroll`
// lines that the runner writes out as straight-line code (kernels.wgsl_source): llvmpipe does not unroll
// loops over constants, and the accumulators must be separate variables to stay out of scratch memory.
// Checked against a float64 reference: normwise relative error <= 1e-4 for f32, 2e-3 for f16 (of C).
// Bindings: 0 Params (M, N, K), 1 A and 2 B (read-only storage textures `InTex`), 3 C (storage buffer);
// workgroup (16, 1, 1).
// Requires M % 128 == 0, N % 128 == 0, K % 4 == 0. Dispatch: (N / 128, M / 64, 1).

struct Params { M: u32, N: u32, K: u32, pad: u32 }

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var A: InTex;
@group(0) @binding(2) var B: InTex;
@group(0) @binding(3) var<storage, read_write> C4: array<vec4<T>>;

const WX = 16u;  // invocations along N; each owns 8 consecutive columns
const PAIR = 2u;  // row blocks that consecutive workgroups take on one stripe of B

struct Acc { lo: vec4<f32>, hi: vec4<f32> }

// Four consecutive rows of B (one K quad) at the invocation's 8 columns: l = the first 4, h = the next 4.
struct Panel {
    l0: vec4<f32>, l1: vec4<f32>, l2: vec4<f32>, l3: vec4<f32>,
    h0: vec4<f32>, h1: vec4<f32>, h2: vec4<f32>, h3: vec4<f32>,
}

fn load_panel(k: u32, co: u32) -> Panel {
    let x = co * 2u;
    return Panel(
        textureLoad(B, vec2<u32>(x, k)), textureLoad(B, vec2<u32>(x, k + 1u)),
        textureLoad(B, vec2<u32>(x, k + 2u)), textureLoad(B, vec2<u32>(x, k + 3u)),
        textureLoad(B, vec2<u32>(x + 1u, k)), textureLoad(B, vec2<u32>(x + 1u, k + 1u)),
        textureLoad(B, vec2<u32>(x + 1u, k + 2u)), textureLoad(B, vec2<u32>(x + 1u, k + 3u)),
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
    @builtin(num_workgroups) groups: vec3<u32>,
    @builtin(subgroup_invocation_id) sg_lane: u32,
    @builtin(subgroup_size) sg_size: u32,
) {
    let K4 = p.K / 4u;
    let N4 = p.N / 4u;
    // Workgroup id in dispatch order -> (stripe of B, row block): PAIR row blocks per stripe, then the next stripe.
    let id = wid.y * groups.x + wid.x;
    let pairs = id / (PAIR * groups.x);
    let block = pairs * PAIR + id % PAIR;
    let stripe = (id / PAIR) % groups.x;
    let row = block * 64u;  // the same rows for the whole workgroup
    let co = stripe * WX + lid.x;
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
        //! unroll j in 0..8: let a{j} = textureLoad(A, vec2<u32>(kq, row + {8 * j}u + lane));
        let b = load_panel(kq * 4u, co);
        //! unroll i in 0..64: c{i} = step(c{i}, subgroupBroadcast(a{i / 8}, {i % 8}u), b);
    }
    //! unroll i in 0..64: store(row + {i}u, N4, co, c{i});
}
