#version 450
// Peak FLOP/s probe in GLSL for the SPIR-V path: the same chains as `main` of ../peak_fma.wgsl (3
// independent vec4 FMA chains per invocation, x = fma(x, a, b) for `iters` steps, 16 steps per loop
// trip, exact result by construction: checked bit-exact; the runner's a and b are described there).
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
    VEC4 x0 = start(base, 0u), x1 = start(base, 1u), x2 = start(base, 2u);
    // Sixteen steps of each chain per trip, the chains interleaved, written out by the preprocessor
    // (an unroll hint is not honoured by every driver).
#define STEP x0 = fma(x0, a, b); x1 = fma(x1, a, b); x2 = fma(x2, a, b);
    for (uint k = 0u; k < iters; k += 16u) {
        STEP STEP STEP STEP
        STEP STEP STEP STEP
        STEP STEP STEP STEP
        STEP STEP STEP STEP
    }
#undef STEP
    vec4 s = vec4(x0) + vec4(x1) + vec4(x2);
    result[i] = s.x + s.y + s.z + s.w;
}
