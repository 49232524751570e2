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
// 16-byte loads and a transpose. On Mesa 22.3 that takes the 1024^3 GEMM from 0.42-0.45 of the FMA
// peak (gemm_subgroup) to 0.50-0.55 (mobile/README.md).
// Workgroup order: pairs of consecutive workgroups share a column stripe of B (two row blocks of one
// stripe, then the next stripe) instead of one row block of A: lavapipe hands consecutive workgroups to
// its threads in turn, so both cores stream the same lines of B at once (4-5 % faster on lavapipe).
// Needs the `subgroup` feature and subgroups of at least 8 invocations (the runner measures the size;
// a narrower subgroup poisons the output with NaN so that the result check fails instead of lying).
// Accumulation is in f32 whatever the storage type T of C.
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
    var c0 = Acc(vec4<f32>(0.0), vec4<f32>(0.0));
    var c1 = Acc(vec4<f32>(0.0), vec4<f32>(0.0));
    var c2 = Acc(vec4<f32>(0.0), vec4<f32>(0.0));
    var c3 = Acc(vec4<f32>(0.0), vec4<f32>(0.0));
    var c4 = Acc(vec4<f32>(0.0), vec4<f32>(0.0));
    var c5 = Acc(vec4<f32>(0.0), vec4<f32>(0.0));
    var c6 = Acc(vec4<f32>(0.0), vec4<f32>(0.0));
    var c7 = Acc(vec4<f32>(0.0), vec4<f32>(0.0));
    var c8 = Acc(vec4<f32>(0.0), vec4<f32>(0.0));
    var c9 = Acc(vec4<f32>(0.0), vec4<f32>(0.0));
    var c10 = Acc(vec4<f32>(0.0), vec4<f32>(0.0));
    var c11 = Acc(vec4<f32>(0.0), vec4<f32>(0.0));
    var c12 = Acc(vec4<f32>(0.0), vec4<f32>(0.0));
    var c13 = Acc(vec4<f32>(0.0), vec4<f32>(0.0));
    var c14 = Acc(vec4<f32>(0.0), vec4<f32>(0.0));
    var c15 = Acc(vec4<f32>(0.0), vec4<f32>(0.0));
    var c16 = Acc(vec4<f32>(0.0), vec4<f32>(0.0));
    var c17 = Acc(vec4<f32>(0.0), vec4<f32>(0.0));
    var c18 = Acc(vec4<f32>(0.0), vec4<f32>(0.0));
    var c19 = Acc(vec4<f32>(0.0), vec4<f32>(0.0));
    var c20 = Acc(vec4<f32>(0.0), vec4<f32>(0.0));
    var c21 = Acc(vec4<f32>(0.0), vec4<f32>(0.0));
    var c22 = Acc(vec4<f32>(0.0), vec4<f32>(0.0));
    var c23 = Acc(vec4<f32>(0.0), vec4<f32>(0.0));
    var c24 = Acc(vec4<f32>(0.0), vec4<f32>(0.0));
    var c25 = Acc(vec4<f32>(0.0), vec4<f32>(0.0));
    var c26 = Acc(vec4<f32>(0.0), vec4<f32>(0.0));
    var c27 = Acc(vec4<f32>(0.0), vec4<f32>(0.0));
    var c28 = Acc(vec4<f32>(0.0), vec4<f32>(0.0));
    var c29 = Acc(vec4<f32>(0.0), vec4<f32>(0.0));
    var c30 = Acc(vec4<f32>(0.0), vec4<f32>(0.0));
    var c31 = Acc(vec4<f32>(0.0), vec4<f32>(0.0));
    var c32 = Acc(vec4<f32>(0.0), vec4<f32>(0.0));
    var c33 = Acc(vec4<f32>(0.0), vec4<f32>(0.0));
    var c34 = Acc(vec4<f32>(0.0), vec4<f32>(0.0));
    var c35 = Acc(vec4<f32>(0.0), vec4<f32>(0.0));
    var c36 = Acc(vec4<f32>(0.0), vec4<f32>(0.0));
    var c37 = Acc(vec4<f32>(0.0), vec4<f32>(0.0));
    var c38 = Acc(vec4<f32>(0.0), vec4<f32>(0.0));
    var c39 = Acc(vec4<f32>(0.0), vec4<f32>(0.0));
    var c40 = Acc(vec4<f32>(0.0), vec4<f32>(0.0));
    var c41 = Acc(vec4<f32>(0.0), vec4<f32>(0.0));
    var c42 = Acc(vec4<f32>(0.0), vec4<f32>(0.0));
    var c43 = Acc(vec4<f32>(0.0), vec4<f32>(0.0));
    var c44 = Acc(vec4<f32>(0.0), vec4<f32>(0.0));
    var c45 = Acc(vec4<f32>(0.0), vec4<f32>(0.0));
    var c46 = Acc(vec4<f32>(0.0), vec4<f32>(0.0));
    var c47 = Acc(vec4<f32>(0.0), vec4<f32>(0.0));
    var c48 = Acc(vec4<f32>(0.0), vec4<f32>(0.0));
    var c49 = Acc(vec4<f32>(0.0), vec4<f32>(0.0));
    var c50 = Acc(vec4<f32>(0.0), vec4<f32>(0.0));
    var c51 = Acc(vec4<f32>(0.0), vec4<f32>(0.0));
    var c52 = Acc(vec4<f32>(0.0), vec4<f32>(0.0));
    var c53 = Acc(vec4<f32>(0.0), vec4<f32>(0.0));
    var c54 = Acc(vec4<f32>(0.0), vec4<f32>(0.0));
    var c55 = Acc(vec4<f32>(0.0), vec4<f32>(0.0));
    var c56 = Acc(vec4<f32>(0.0), vec4<f32>(0.0));
    var c57 = Acc(vec4<f32>(0.0), vec4<f32>(0.0));
    var c58 = Acc(vec4<f32>(0.0), vec4<f32>(0.0));
    var c59 = Acc(vec4<f32>(0.0), vec4<f32>(0.0));
    var c60 = Acc(vec4<f32>(0.0), vec4<f32>(0.0));
    var c61 = Acc(vec4<f32>(0.0), vec4<f32>(0.0));
    var c62 = Acc(vec4<f32>(0.0), vec4<f32>(0.0));
    var c63 = Acc(vec4<f32>(0.0), vec4<f32>(0.0));
    for (var kq = 0u; kq < K4; kq++) {
        let a0 = textureLoad(A, vec2<u32>(kq, row + 0u + lane));
        let a1 = textureLoad(A, vec2<u32>(kq, row + 8u + lane));
        let a2 = textureLoad(A, vec2<u32>(kq, row + 16u + lane));
        let a3 = textureLoad(A, vec2<u32>(kq, row + 24u + lane));
        let a4 = textureLoad(A, vec2<u32>(kq, row + 32u + lane));
        let a5 = textureLoad(A, vec2<u32>(kq, row + 40u + lane));
        let a6 = textureLoad(A, vec2<u32>(kq, row + 48u + lane));
        let a7 = textureLoad(A, vec2<u32>(kq, row + 56u + lane));
        let b = load_panel(kq * 4u, co);
        c0 = step(c0, subgroupBroadcast(a0, 0u), b);
        c1 = step(c1, subgroupBroadcast(a0, 1u), b);
        c2 = step(c2, subgroupBroadcast(a0, 2u), b);
        c3 = step(c3, subgroupBroadcast(a0, 3u), b);
        c4 = step(c4, subgroupBroadcast(a0, 4u), b);
        c5 = step(c5, subgroupBroadcast(a0, 5u), b);
        c6 = step(c6, subgroupBroadcast(a0, 6u), b);
        c7 = step(c7, subgroupBroadcast(a0, 7u), b);
        c8 = step(c8, subgroupBroadcast(a1, 0u), b);
        c9 = step(c9, subgroupBroadcast(a1, 1u), b);
        c10 = step(c10, subgroupBroadcast(a1, 2u), b);
        c11 = step(c11, subgroupBroadcast(a1, 3u), b);
        c12 = step(c12, subgroupBroadcast(a1, 4u), b);
        c13 = step(c13, subgroupBroadcast(a1, 5u), b);
        c14 = step(c14, subgroupBroadcast(a1, 6u), b);
        c15 = step(c15, subgroupBroadcast(a1, 7u), b);
        c16 = step(c16, subgroupBroadcast(a2, 0u), b);
        c17 = step(c17, subgroupBroadcast(a2, 1u), b);
        c18 = step(c18, subgroupBroadcast(a2, 2u), b);
        c19 = step(c19, subgroupBroadcast(a2, 3u), b);
        c20 = step(c20, subgroupBroadcast(a2, 4u), b);
        c21 = step(c21, subgroupBroadcast(a2, 5u), b);
        c22 = step(c22, subgroupBroadcast(a2, 6u), b);
        c23 = step(c23, subgroupBroadcast(a2, 7u), b);
        c24 = step(c24, subgroupBroadcast(a3, 0u), b);
        c25 = step(c25, subgroupBroadcast(a3, 1u), b);
        c26 = step(c26, subgroupBroadcast(a3, 2u), b);
        c27 = step(c27, subgroupBroadcast(a3, 3u), b);
        c28 = step(c28, subgroupBroadcast(a3, 4u), b);
        c29 = step(c29, subgroupBroadcast(a3, 5u), b);
        c30 = step(c30, subgroupBroadcast(a3, 6u), b);
        c31 = step(c31, subgroupBroadcast(a3, 7u), b);
        c32 = step(c32, subgroupBroadcast(a4, 0u), b);
        c33 = step(c33, subgroupBroadcast(a4, 1u), b);
        c34 = step(c34, subgroupBroadcast(a4, 2u), b);
        c35 = step(c35, subgroupBroadcast(a4, 3u), b);
        c36 = step(c36, subgroupBroadcast(a4, 4u), b);
        c37 = step(c37, subgroupBroadcast(a4, 5u), b);
        c38 = step(c38, subgroupBroadcast(a4, 6u), b);
        c39 = step(c39, subgroupBroadcast(a4, 7u), b);
        c40 = step(c40, subgroupBroadcast(a5, 0u), b);
        c41 = step(c41, subgroupBroadcast(a5, 1u), b);
        c42 = step(c42, subgroupBroadcast(a5, 2u), b);
        c43 = step(c43, subgroupBroadcast(a5, 3u), b);
        c44 = step(c44, subgroupBroadcast(a5, 4u), b);
        c45 = step(c45, subgroupBroadcast(a5, 5u), b);
        c46 = step(c46, subgroupBroadcast(a5, 6u), b);
        c47 = step(c47, subgroupBroadcast(a5, 7u), b);
        c48 = step(c48, subgroupBroadcast(a6, 0u), b);
        c49 = step(c49, subgroupBroadcast(a6, 1u), b);
        c50 = step(c50, subgroupBroadcast(a6, 2u), b);
        c51 = step(c51, subgroupBroadcast(a6, 3u), b);
        c52 = step(c52, subgroupBroadcast(a6, 4u), b);
        c53 = step(c53, subgroupBroadcast(a6, 5u), b);
        c54 = step(c54, subgroupBroadcast(a6, 6u), b);
        c55 = step(c55, subgroupBroadcast(a6, 7u), b);
        c56 = step(c56, subgroupBroadcast(a7, 0u), b);
        c57 = step(c57, subgroupBroadcast(a7, 1u), b);
        c58 = step(c58, subgroupBroadcast(a7, 2u), b);
        c59 = step(c59, subgroupBroadcast(a7, 3u), b);
        c60 = step(c60, subgroupBroadcast(a7, 4u), b);
        c61 = step(c61, subgroupBroadcast(a7, 5u), b);
        c62 = step(c62, subgroupBroadcast(a7, 6u), b);
        c63 = step(c63, subgroupBroadcast(a7, 7u), b);
    }
    store(row + 0u, N4, co, c0);
    store(row + 1u, N4, co, c1);
    store(row + 2u, N4, co, c2);
    store(row + 3u, N4, co, c3);
    store(row + 4u, N4, co, c4);
    store(row + 5u, N4, co, c5);
    store(row + 6u, N4, co, c6);
    store(row + 7u, N4, co, c7);
    store(row + 8u, N4, co, c8);
    store(row + 9u, N4, co, c9);
    store(row + 10u, N4, co, c10);
    store(row + 11u, N4, co, c11);
    store(row + 12u, N4, co, c12);
    store(row + 13u, N4, co, c13);
    store(row + 14u, N4, co, c14);
    store(row + 15u, N4, co, c15);
    store(row + 16u, N4, co, c16);
    store(row + 17u, N4, co, c17);
    store(row + 18u, N4, co, c18);
    store(row + 19u, N4, co, c19);
    store(row + 20u, N4, co, c20);
    store(row + 21u, N4, co, c21);
    store(row + 22u, N4, co, c22);
    store(row + 23u, N4, co, c23);
    store(row + 24u, N4, co, c24);
    store(row + 25u, N4, co, c25);
    store(row + 26u, N4, co, c26);
    store(row + 27u, N4, co, c27);
    store(row + 28u, N4, co, c28);
    store(row + 29u, N4, co, c29);
    store(row + 30u, N4, co, c30);
    store(row + 31u, N4, co, c31);
    store(row + 32u, N4, co, c32);
    store(row + 33u, N4, co, c33);
    store(row + 34u, N4, co, c34);
    store(row + 35u, N4, co, c35);
    store(row + 36u, N4, co, c36);
    store(row + 37u, N4, co, c37);
    store(row + 38u, N4, co, c38);
    store(row + 39u, N4, co, c39);
    store(row + 40u, N4, co, c40);
    store(row + 41u, N4, co, c41);
    store(row + 42u, N4, co, c42);
    store(row + 43u, N4, co, c43);
    store(row + 44u, N4, co, c44);
    store(row + 45u, N4, co, c45);
    store(row + 46u, N4, co, c46);
    store(row + 47u, N4, co, c47);
    store(row + 48u, N4, co, c48);
    store(row + 49u, N4, co, c49);
    store(row + 50u, N4, co, c50);
    store(row + 51u, N4, co, c51);
    store(row + 52u, N4, co, c52);
    store(row + 53u, N4, co, c53);
    store(row + 54u, N4, co, c54);
    store(row + 55u, N4, co, c55);
    store(row + 56u, N4, co, c56);
    store(row + 57u, N4, co, c57);
    store(row + 58u, N4, co, c58);
    store(row + 59u, N4, co, c59);
    store(row + 60u, N4, co, c60);
    store(row + 61u, N4, co, c61);
    store(row + 62u, N4, co, c62);
    store(row + 63u, N4, co, c63);
}
