// Peak FLOP/s probe in the manner of vkpeak: long chains of independent FMAs in the storage type T.
// Each invocation runs C independent vec4 chains (4 C lanes) for `iters` steps of x = fma(x, a, b),
// so FLOPs = invocations * iters * 4 C * 2. Three entry points: `main` (C = 3, kernel peak_fma),
// `two_chains` (peak_fma_2chain) and `four_chains` (peak_fma_4chain); the runner takes the fastest
// f32 one as the adapter's peak, because which C is fastest depends on the driver's compiler and is
// measured, not derived (mobile/README.md has the figures per driver). A compiler that splits fma()
// into a multiply and an add (llvmpipe does, here and in the GEMMs) makes this the multiply-add peak
// that the GEMM kernels' fma() can reach. GPUs hide FMA latency with other warps, so 8 to 16
// independent lanes per invocation are plenty there. The loop body is 16 steps of every chain per trip,
// written out by `//! unroll` lines (kernels.wgsl_source) so that loop overhead stays small on CPU
// adapters, which do not unroll the loop themselves.
// `iters` is a power of two >= 16. `a` and `b` come from a uniform buffer and cannot be
// folded. Lane m of invocation i starts at ((7 i + m) mod 256) / 256. The runner checks the step
// count with a = 1 and b = 1 / iters (iters <= 1024): every intermediate value is a multiple of 2^-10
// below 2, exact in f16 and f32, so the exact result shows that every step ran. The timed dispatch,
// sized to the device (fleetbench.edge.peak_sizing), passes a = -1 and b = 1 (x -> 1 - x): exact at
// any even step count, each lane back at its start, so the check does not cap the work.
// Output: one f32 per invocation, the sum of its 4 C final values (exact in f32); checked bit-exact.
// Bindings: 0 Params (iters, a, b), 1 the output (storage).
// Dispatch: (groups_x, groups_y, 1) of 256 invocations.

struct Params { iters: u32, a: f32, b: f32, pad: u32 }

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> result: array<f32>;

// What every entry point gets: one invocation of the dispatch.
struct Ids {
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
}

fn invocation(ids: Ids) -> u32 {
    return (ids.wid.y * ids.nwg.x + ids.wid.x) * 256u + ids.lid;
}

// Lanes 4 chain .. 4 chain + 3 of invocation i start at ((7 i + m) mod 256) / 256.
fn start(i: u32, chain: u32) -> vec4<T> {
    let m = (i * 7u) % 256u + chain * 4u;
    return vec4<T>(vec4<f32>(f32(m % 256u), f32((m + 1u) % 256u), f32((m + 2u) % 256u), f32((m + 3u) % 256u)) / 256.0);
}

fn finish(i: u32, s: vec4<f32>) {
    result[i] = s.x + s.y + s.z + s.w;
}

@compute @workgroup_size(256)
fn main(ids: Ids) {
    let i = invocation(ids);
    let a = vec4<T>(T(p.a));
    let b = vec4<T>(T(p.b));
    var x0 = start(i, 0u);
    var x1 = start(i, 1u);
    var x2 = start(i, 2u);
    // Sixteen steps of each chain per trip, the chains interleaved.
    for (var k = 0u; k < p.iters; k += 16u) {
        //! unroll s in 0..48: x{s % 3} = fma(x{s % 3}, a, b);
    }
    finish(i, vec4<f32>(x0) + vec4<f32>(x1) + vec4<f32>(x2));
}

@compute @workgroup_size(256)
fn two_chains(ids: Ids) {
    let i = invocation(ids);
    let a = vec4<T>(T(p.a));
    let b = vec4<T>(T(p.b));
    var x0 = start(i, 0u);
    var x1 = start(i, 1u);
    // Sixteen steps of each chain per trip, the chains interleaved.
    for (var k = 0u; k < p.iters; k += 16u) {
        //! unroll s in 0..32: x{s % 2} = fma(x{s % 2}, a, b);
    }
    finish(i, vec4<f32>(x0) + vec4<f32>(x1));
}

@compute @workgroup_size(256)
fn four_chains(ids: Ids) {
    let i = invocation(ids);
    let a = vec4<T>(T(p.a));
    let b = vec4<T>(T(p.b));
    var x0 = start(i, 0u);
    var x1 = start(i, 1u);
    var x2 = start(i, 2u);
    var x3 = start(i, 3u);
    // Sixteen steps of each chain per trip, the chains interleaved.
    for (var k = 0u; k < p.iters; k += 16u) {
        //! unroll s in 0..64: x{s % 4} = fma(x{s % 4}, a, b);
    }
    finish(i, vec4<f32>(x0) + vec4<f32>(x1) + vec4<f32>(x2) + vec4<f32>(x3));
}
