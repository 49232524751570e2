// gemm_coopmat: C = A x B with VK_KHR_cooperative_matrix, fp16 inputs, fp32 accumulation and output.
//
// Contract:
//   bindings (set 0): 0 uniform Params {uvec4 mnk} (M, N, K, unused); 1 A (M x K float16, row-major);
//   2 B (K x N float16, row-major); 3 C (M x N float32, row-major).
//   specialisation constants: 0..2 the cooperative-matrix shape lM x lN x lK, chosen by the runner
//   from the adapter's VkCooperativeMatrixPropertiesKHR (A/B float16, C/result float32, subgroup
//   scope); 3 the subgroup size, which is the workgroup size (one subgroup per workgroup).
//   dispatch: (N / (TN * lN), M / (TM * lM), 1); each workgroup computes a TM x TN block of lM x lN
//   tiles of C, loading A's and B's tiles straight from global memory (no shared-memory staging).
//   needs: VK_KHR_cooperative_matrix (cooperativeMatrix), shaderFloat16, storageBuffer16BitAccess,
//   vulkanMemoryModel; M, N multiples of TM * lM and TN * lN, K a multiple of lK.
//   checked: against numpy's float64 product of the same float16 inputs (normwise relative error).
// Compiled by glslc or glslangValidator with GL_KHR_cooperative_matrix (glslang 13.0 or later),
// --target-env=vulkan1.3, and validated with spirv-val.
#version 450
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_shader_16bit_storage : require

layout(constant_id = 0) const uint lM = 16;
layout(constant_id = 1) const uint lN = 16;
layout(constant_id = 2) const uint lK = 16;
layout(constant_id = 3) const uint SUBGROUP_SIZE = 32;
layout(local_size_x_id = 3, local_size_y = 1, local_size_z = 1) in;

const uint TM = 2;  // tiles of C per workgroup, down
const uint TN = 2;  // and across

layout(set = 0, binding = 0) uniform Params { uvec4 mnk; } params;
layout(set = 0, binding = 1) readonly buffer InA { float16_t a[]; };
layout(set = 0, binding = 2) readonly buffer InB { float16_t b[]; };
layout(set = 0, binding = 3) writeonly buffer OutC { float c[]; };

void main() {
    const uint N = params.mnk.y;
    const uint K = params.mnk.z;
    const uint row0 = gl_WorkGroupID.y * TM * lM;
    const uint col0 = gl_WorkGroupID.x * TN * lN;

    coopmat<float, gl_ScopeSubgroup, lM, lN, gl_MatrixUseAccumulator> acc[TM][TN];
    for (uint i = 0; i < TM; ++i) {
        for (uint j = 0; j < TN; ++j) {
            acc[i][j] = coopmat<float, gl_ScopeSubgroup, lM, lN, gl_MatrixUseAccumulator>(0.0);
        }
    }
    for (uint k = 0; k < K; k += lK) {
        coopmat<float16_t, gl_ScopeSubgroup, lM, lK, gl_MatrixUseA> tileA[TM];
        coopmat<float16_t, gl_ScopeSubgroup, lK, lN, gl_MatrixUseB> tileB[TN];
        for (uint i = 0; i < TM; ++i) {
            coopMatLoad(tileA[i], a, (row0 + i * lM) * K + k, K, gl_CooperativeMatrixLayoutRowMajor);
        }
        for (uint j = 0; j < TN; ++j) {
            coopMatLoad(tileB[j], b, k * N + col0 + j * lN, N, gl_CooperativeMatrixLayoutRowMajor);
        }
        for (uint i = 0; i < TM; ++i) {
            for (uint j = 0; j < TN; ++j) {
                acc[i][j] = coopMatMulAdd(tileA[i], tileB[j], acc[i][j]);
            }
        }
    }
    for (uint i = 0; i < TM; ++i) {
        for (uint j = 0; j < TN; ++j) {
            coopMatStore(acc[i][j], c, (row0 + i * lM) * N + col0 + j * lN, N, gl_CooperativeMatrixLayoutRowMajor);
        }
    }
}
