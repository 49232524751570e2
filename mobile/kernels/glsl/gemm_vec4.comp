#version 450
// GEMM, register-blocked with vec4 loads, in GLSL for the SPIR-V path (glslc -> SPIR-V -> Vulkan):
// the same algorithm as ../gemm_vec4.wgsl. C[M,N] = A[M,K] * B[K,N], row-major, f32 accumulation.
// Each invocation keeps 16 rows x 8 columns of C (two vec4 columns 16 quads apart) in registers.
// Storage type: float, or float16_t when compiled with -DFLEETBENCH_F16 (needs shaderFloat16 and
// 16-bit storage). Requires M % 128 == 0, N % 128 == 0, K % 4 == 0. Dispatch: (N / 128, M / 128, 1).
// Checked against a float64 reference: normwise relative error <= 1e-4 for f32, 2e-3 for f16.
#ifdef FLEETBENCH_F16
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_shader_16bit_storage : require
#define VEC4 f16vec4
#else
#define VEC4 vec4
#endif

layout(local_size_x = 16, local_size_y = 8) in;

layout(set = 0, binding = 0) uniform Params { uint M; uint N; uint K; uint pad; } p;
layout(set = 0, binding = 1) readonly buffer BufA { VEC4 A4[]; };
layout(set = 0, binding = 2) readonly buffer BufB { VEC4 B4[]; };
layout(set = 0, binding = 3) writeonly buffer BufC { VEC4 C4[]; };

const uint WX = 16u;

#define DECL(i) vec4 lo##i = vec4(0.0), hi##i = vec4(0.0);
#define STEP(i) { \
        vec4 a = vec4(A4[(row + uint(i)) * K4 + kq]); \
        lo##i = fma(vec4(a.x), l0, lo##i); lo##i = fma(vec4(a.y), l1, lo##i); \
        lo##i = fma(vec4(a.z), l2, lo##i); lo##i = fma(vec4(a.w), l3, lo##i); \
        hi##i = fma(vec4(a.x), h0, hi##i); hi##i = fma(vec4(a.y), h1, hi##i); \
        hi##i = fma(vec4(a.z), h2, hi##i); hi##i = fma(vec4(a.w), h3, hi##i); }
#define STORE(i) \
    C4[(row + uint(i)) * N4 + cq] = VEC4(lo##i); \
    C4[(row + uint(i)) * N4 + cq + WX] = VEC4(hi##i);
#define ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12) X(13) X(14) X(15)

void main() {
    uint K4 = p.K / 4u;
    uint N4 = p.N / 4u;
    uint row = gl_GlobalInvocationID.y * 16u;
    uint cq = gl_WorkGroupID.x * WX * 2u + gl_LocalInvocationID.x;
    ROWS(DECL)
    for (uint kq = 0u; kq < K4; kq++) {
        uint r0 = kq * 4u * N4 + cq;
        vec4 l0 = vec4(B4[r0]), l1 = vec4(B4[r0 + N4]), l2 = vec4(B4[r0 + 2u * N4]), l3 = vec4(B4[r0 + 3u * N4]);
        vec4 h0 = vec4(B4[r0 + WX]), h1 = vec4(B4[r0 + N4 + WX]);
        vec4 h2 = vec4(B4[r0 + 2u * N4 + WX]), h3 = vec4(B4[r0 + 3u * N4 + WX]);
        ROWS(STEP)
    }
    ROWS(STORE)
}
