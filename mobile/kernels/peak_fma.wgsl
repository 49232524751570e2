// Peak FLOP/s probe in the manner of vkpeak: long chains of independent FMAs in the storage type T.
// Each invocation runs 8 independent vec4 chains (32 lanes) for `iters` steps of x = fma(x, a, b),
// so FLOPs = invocations * iters * 32 * 2. The loop body is unrolled 8 steps deep, as vkpeak's is:
// with one step per trip, loop overhead rather than FMA throughput sets the rate on some targets
// (lavapipe measured about half its FMA rate that way). `iters` is a power of two >= 16. `a` and `b` come from a uniform buffer and cannot be
// folded. The runner passes a = 1 and b = 1 / iters (iters a power of two <= 1024) and starts lane m
// of invocation i at ((7 i + m) mod 256) / 256: every intermediate value is a multiple of 2^-10 below
// 2, exact in f16 and f32, so the result is exact and checks that every step really ran.
// Output: one f32 per invocation, the sum of its 32 final values (exact in f32).
// Dispatch: (groups_x, groups_y, 1) of 256 invocations.

struct Params { iters: u32, a: f32, b: f32, pad: u32 }

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> result: array<f32>;

// Eight steps of one chain.
fn run8(x: vec4<T>, a: vec4<T>, b: vec4<T>) -> vec4<T> {
    var y = fma(x, a, b);
    y = fma(y, a, b);
    y = fma(y, a, b);
    y = fma(y, a, b);
    y = fma(y, a, b);
    y = fma(y, a, b);
    y = fma(y, a, b);
    return fma(y, a, b);
}

fn start(base: u32, chain: u32) -> vec4<T> {
    let m = base + chain * 4u;
    return vec4<T>(vec4<f32>(f32(m % 256u), f32((m + 1u) % 256u), f32((m + 2u) % 256u), f32((m + 3u) % 256u)) / 256.0);
}

@compute @workgroup_size(256)
fn main(
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
) {
    let i = (wid.y * nwg.x + wid.x) * 256u + lid;
    let a = vec4<T>(T(p.a));
    let b = vec4<T>(T(p.b));
    let base = (i * 7u) % 256u;
    var x0 = start(base, 0u);
    var x1 = start(base, 1u);
    var x2 = start(base, 2u);
    var x3 = start(base, 3u);
    var x4 = start(base, 4u);
    var x5 = start(base, 5u);
    var x6 = start(base, 6u);
    var x7 = start(base, 7u);
    for (var k = 0u; k < p.iters; k += 8u) {
        x0 = run8(x0, a, b);
        x1 = run8(x1, a, b);
        x2 = run8(x2, a, b);
        x3 = run8(x3, a, b);
        x4 = run8(x4, a, b);
        x5 = run8(x5, a, b);
        x6 = run8(x6, a, b);
        x7 = run8(x7, a, b);
    }
    let s = vec4<f32>(x0) + vec4<f32>(x1) + vec4<f32>(x2) + vec4<f32>(x3)
          + vec4<f32>(x4) + vec4<f32>(x5) + vec4<f32>(x6) + vec4<f32>(x7);
    result[i] = s.x + s.y + s.z + s.w;
}
