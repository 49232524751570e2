// Copy bandwidth probe: dst = src, 16 bytes (one vec4<u32>) per invocation and loop step.
// Each invocation copies `per_invocation` quads spaced one grid apart, so every step of the grid
// reads and writes one contiguous span. The storage type does not matter; `T` is unused here.
// Checked bit-exact against the input.
// Dispatch: (groups_x, groups_y, 1) with 256 invocations per workgroup.

struct Params { quads: u32, stride: u32, pad0: u32, pad1: u32 }

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> src: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read_write> dst: array<vec4<u32>>;

@compute @workgroup_size(256)
fn main(
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
) {
    for (var i = (wid.y * nwg.x + wid.x) * 256u + lid; i < p.quads; i += p.stride) {
        dst[i] = src[i];
    }
}
