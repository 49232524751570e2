// RMSNorm over the last dimension: y[r, c] = x[r, c] / sqrt(mean(x[r, :]^2) + eps) * w[c].
// One workgroup of 64 invocations per row; tree reduction of the sum of squares in workgroup memory.
// Arithmetic in f32 whatever the storage type T.
// Checked against a float64 reference: normwise relative error <= 1e-4 for f32, 2e-3 for f16.
// Dispatch: (min(rows, 65535), ceil(rows / 65535), 1); the row is wid.y * num_workgroups.x + wid.x.

struct Params { rows: u32, cols: u32, eps: f32, pad: u32 }

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<T>;
@group(0) @binding(2) var<storage, read> w: array<T>;
@group(0) @binding(3) var<storage, read_write> y: array<T>;

const WG = 64u;
var<workgroup> partial: array<f32, 64>;

@compute @workgroup_size(64)
fn main(
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
) {
    let row = wid.y * nwg.x + wid.x;
    if (row >= p.rows) {
        return;  // uniform across the workgroup
    }
    let base = row * p.cols;
    var ss = 0.0;
    for (var c = lid; c < p.cols; c += WG) {
        let v = f32(x[base + c]);
        ss = fma(v, v, ss);
    }
    partial[lid] = ss;
    workgroupBarrier();
    for (var stride = WG / 2u; stride > 0u; stride /= 2u) {
        if (lid < stride) {
            partial[lid] = partial[lid] + partial[lid + stride];
        }
        workgroupBarrier();
    }
    let scale = inverseSqrt(partial[0] / f32(p.cols) + p.eps);
    for (var c = lid; c < p.cols; c += WG) {
        y[base + c] = T(f32(x[base + c]) * scale * f32(w[c]));
    }
}
