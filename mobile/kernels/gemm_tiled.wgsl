// GEMM, shared-memory tiled: C[M,N] = A[M,K] * B[K,N], row-major.
// A workgroup of 16x16 invocations computes a 64x64 tile of C. Each K step stages a 64x16 panel of A
// and a 16x64 panel of B in workgroup memory; each invocation then accumulates a 4-row x vec4 block.
// Accumulation is in f32 whatever the storage type T (the runner prepends `alias T = f32|f16;`).
// Checked against a float64 reference: normwise relative error <= 1e-4 for f32, 2e-3 for f16.
// Requires M % 64 == 0, N % 64 == 0, K % 16 == 0. Dispatch: (N / 64, M / 64, 1).

struct Params { M: u32, N: u32, K: u32, pad: u32 }

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> A4: array<vec4<T>>;
@group(0) @binding(2) var<storage, read> B4: array<vec4<T>>;
@group(0) @binding(3) var<storage, read_write> C4: array<vec4<T>>;

var<workgroup> As: array<vec4<f32>, 256>;  // 64 rows x 16 k, as [row][k / 4]
var<workgroup> Bs: array<vec4<f32>, 256>;  // 16 k x 64 columns, as [k][column / 4]

@compute @workgroup_size(16, 16)
fn main(
    @builtin(local_invocation_id) lid: vec3<u32>,
    @builtin(local_invocation_index) li: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
) {
    let K4 = p.K / 4u;
    let N4 = p.N / 4u;
    let row0 = wid.y * 64u;
    let cq0 = wid.x * 16u;
    var c0 = vec4<f32>(0.0);
    var c1 = vec4<f32>(0.0);
    var c2 = vec4<f32>(0.0);
    var c3 = vec4<f32>(0.0);
    for (var t = 0u; t < K4; t += 4u) {
        As[li] = vec4<f32>(A4[(row0 + li / 4u) * K4 + t + li % 4u]);
        Bs[li] = vec4<f32>(B4[(t * 4u + li / 16u) * N4 + cq0 + li % 16u]);
        workgroupBarrier();
        for (var kq = 0u; kq < 4u; kq++) {
            let r = lid.y * 16u + kq;  // row lid.y * 4 of the tile, k quad kq
            let a0 = As[r];
            let a1 = As[r + 4u];
            let a2 = As[r + 8u];
            let a3 = As[r + 12u];
            let b0 = Bs[(kq * 4u + 0u) * 16u + lid.x];
            let b1 = Bs[(kq * 4u + 1u) * 16u + lid.x];
            let b2 = Bs[(kq * 4u + 2u) * 16u + lid.x];
            let b3 = Bs[(kq * 4u + 3u) * 16u + lid.x];
            c0 = fma(vec4(a0.x), b0, fma(vec4(a0.y), b1, fma(vec4(a0.z), b2, fma(vec4(a0.w), b3, c0))));
            c1 = fma(vec4(a1.x), b0, fma(vec4(a1.y), b1, fma(vec4(a1.z), b2, fma(vec4(a1.w), b3, c1))));
            c2 = fma(vec4(a2.x), b0, fma(vec4(a2.y), b1, fma(vec4(a2.z), b2, fma(vec4(a2.w), b3, c2))));
            c3 = fma(vec4(a3.x), b0, fma(vec4(a3.y), b1, fma(vec4(a3.z), b2, fma(vec4(a3.w), b3, c3))));
        }
        workgroupBarrier();
    }
    let row = row0 + lid.y * 4u;
    let cq = cq0 + lid.x;
    C4[(row + 0u) * N4 + cq] = vec4<T>(c0);
    C4[(row + 1u) * N4 + cq] = vec4<T>(c1);
    C4[(row + 2u) * N4 + cq] = vec4<T>(c2);
    C4[(row + 3u) * N4 + cq] = vec4<T>(c3);
}
