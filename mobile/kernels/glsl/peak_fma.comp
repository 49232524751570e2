#version 450
// Peak FLOP/s probe in GLSL for the SPIR-V path: the same chains as ../peak_fma.wgsl (8 independent
// vec4 FMA chains per invocation, x = fma(x, a, b) for `iters` steps, unrolled 8 deep, exact result
// by construction).
// Storage/arithmetic type: float, or float16_t when compiled with -DFLEETBENCH_F16.
#ifdef FLEETBENCH_F16
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#define SCALAR float16_t
#define VEC4 f16vec4
#else
#define SCALAR float
#define VEC4 vec4
#endif

layout(local_size_x = 256) in;

layout(set = 0, binding = 0) uniform Params { uint iters; float a; float b; uint pad; } p;
layout(set = 0, binding = 1) buffer Result { float result[]; };

// Eight steps of one chain.
VEC4 run8(VEC4 x, VEC4 a, VEC4 b) {
    x = fma(x, a, b);
    x = fma(x, a, b);
    x = fma(x, a, b);
    x = fma(x, a, b);
    x = fma(x, a, b);
    x = fma(x, a, b);
    x = fma(x, a, b);
    return fma(x, a, b);
}

VEC4 start(uint base, uint chain) {
    uint m = base + chain * 4u;
    return VEC4(vec4(float(m % 256u), float((m + 1u) % 256u), float((m + 2u) % 256u), float((m + 3u) % 256u)) / 256.0);
}

void main() {
    uint i = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * 256u + gl_LocalInvocationIndex;
    VEC4 a = VEC4(SCALAR(p.a));
    VEC4 b = VEC4(SCALAR(p.b));
    uint iters = p.iters;
    uint base = (i * 7u) % 256u;
    VEC4 x0 = start(base, 0u), x1 = start(base, 1u), x2 = start(base, 2u), x3 = start(base, 3u);
    VEC4 x4 = start(base, 4u), x5 = start(base, 5u), x6 = start(base, 6u), x7 = start(base, 7u);
    for (uint k = 0u; k < iters; k += 8u) {
        x0 = run8(x0, a, b);
        x1 = run8(x1, a, b);
        x2 = run8(x2, a, b);
        x3 = run8(x3, a, b);
        x4 = run8(x4, a, b);
        x5 = run8(x5, a, b);
        x6 = run8(x6, a, b);
        x7 = run8(x7, a, b);
    }
    vec4 s = vec4(x0) + vec4(x1) + vec4(x2) + vec4(x3) + vec4(x4) + vec4(x5) + vec4(x6) + vec4(x7);
    result[i] = s.x + s.y + s.z + s.w;
}
