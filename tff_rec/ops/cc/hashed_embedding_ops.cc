// TensorFlow ops HashedEmbeddingLookup and HashedEmbeddingLookupGrad: CPU
// kernels, and GPU kernels when built with GOOGLE_CUDA.
#if GOOGLE_CUDA
#define EIGEN_USE_GPU
#endif

#include "hashed_embedding.h"
#include "tensorflow/core/framework/common_shape_fns.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/shape_inference.h"
#include "tensorflow/core/util/work_sharder.h"

namespace tff_rec {

using ::tensorflow::OpKernel;
using ::tensorflow::OpKernelConstruction;
using ::tensorflow::OpKernelContext;
using ::tensorflow::Status;
using ::tensorflow::Tensor;
using ::tensorflow::TensorShape;
using ::tensorflow::errors::InvalidArgument;
namespace shape_inference = ::tensorflow::shape_inference;

REGISTER_OP("HashedEmbeddingLookup")
    .Input("memory: float")
    .Input("ids: Tid")
    .Output("output: float")
    .Attr("Tid: {int32, int64}")
    .Attr("dim: int >= 1")
    .Attr("seed: int")
    .Attr("chunk: int >= 0 = 0")
    .SetShapeFn([](shape_inference::InferenceContext* c) {
      shape_inference::ShapeHandle memory;
      TF_RETURN_IF_ERROR(c->WithRank(c->input(0), 1, &memory));
      int64_t dim;
      TF_RETURN_IF_ERROR(c->GetAttr("dim", &dim));
      shape_inference::DimensionHandle n = c->NumElements(c->input(1));
      c->set_output(0, c->Matrix(n, dim));
      return Status();
    })
    .Doc("Rows `ids` of a virtual n x dim table hashed into flat `memory`.");

REGISTER_OP("HashedEmbeddingLookupGrad")
    .Input("grad: float")
    .Input("ids: Tid")
    .Input("memory_size: int64")
    .Output("slots: int64")
    .Output("values: float")
    .Attr("Tid: {int32, int64}")
    .Attr("dim: int >= 1")
    .Attr("seed: int")
    .Attr("chunk: int >= 0 = 0")
    .SetShapeFn([](shape_inference::InferenceContext* c) {
      shape_inference::ShapeHandle size;
      TF_RETURN_IF_ERROR(c->WithRank(c->input(2), 0, &size));
      shape_inference::DimensionHandle elements;
      TF_RETURN_IF_ERROR(c->Multiply(c->NumElements(c->input(1)), c->Dim(c->input(0), 1),
                                     &elements));
      c->set_output(0, c->Vector(elements));
      c->set_output(1, c->Vector(elements));
      return Status();
    })
    .Doc("Gradient of HashedEmbeddingLookup with respect to memory, as the slots and "
         "values of IndexedSlices (a slot may repeat).");

// The work of each device, behind one interface so that the op classes
// below hold every check and allocation once.
struct CpuDevice {
  // Ids are checked on the host: a negative id is an error.
  static constexpr bool kChecksIds = true;

  template <typename Tid>
  static Status Lookup(OpKernelContext* ctx, const float* memory, uint64_t m,
                       const Tid* ids, int64_t n, int64_t dim, int64_t chunk,
                       const HashParams& p, float* out) {
    auto* workers = ctx->device()->tensorflow_cpu_worker_threads()->workers;
    ::tensorflow::Shard(workers->NumThreads(), workers, n, /*cost_per_unit=*/20 * dim,
                        [&](int64_t begin, int64_t end) {
                          LookupCpu<Tid>(memory, m, ids, begin, end, dim, chunk, p, out);
                        });
    return Status();
  }

  template <typename Tid>
  static Status LookupGrad(OpKernelContext* ctx, const float* grad, const Tid* ids,
                           int64_t n, int64_t dim, int64_t chunk, uint64_t m,
                           const HashParams& p, int64_t* slots, float* values) {
    auto* workers = ctx->device()->tensorflow_cpu_worker_threads()->workers;
    ::tensorflow::Shard(workers->NumThreads(), workers, n, /*cost_per_unit=*/20 * dim,
                        [&](int64_t begin, int64_t end) {
                          LookupGradCpu<Tid>(grad, ids, begin, end, dim, chunk, m, p,
                                             slots, values);
                        });
    return Status();
  }
};

#if GOOGLE_CUDA
struct GpuDevice {
  // Ids stay on the device and are read as unsigned: a negative id maps to
  // some row, still inside memory (slots are reduced mod m), never past it.
  static constexpr bool kChecksIds = false;

  template <typename Tid>
  static Status Lookup(OpKernelContext* ctx, const float* memory, uint64_t m,
                       const Tid* ids, int64_t n, int64_t dim, int64_t chunk,
                       const HashParams& p, float* out) {
    return Launched(LaunchLookupGpu<Tid>(memory, m, ids, n, dim, chunk, p, out,
                                         Stream(ctx)));
  }

  template <typename Tid>
  static Status LookupGrad(OpKernelContext* ctx, const float* grad, const Tid* ids,
                           int64_t n, int64_t dim, int64_t chunk, uint64_t m,
                           const HashParams& p, int64_t* slots, float* values) {
    return Launched(LaunchLookupGradGpu<Tid>(grad, ids, n, dim, chunk, m, p, slots,
                                             values, Stream(ctx)));
  }

 private:
  static void* Stream(OpKernelContext* ctx) {
    return ctx->eigen_device<Eigen::GpuDevice>().stream();
  }
  static Status Launched(int error) {
    return error == 0 ? Status()
                      : ::tensorflow::errors::Internal("CUDA launch failed: error ", error);
  }
};
#endif  // GOOGLE_CUDA

// Attributes and checks shared by both ops.
class HashedEmbeddingBase : public OpKernel {
 public:
  explicit HashedEmbeddingBase(OpKernelConstruction* ctx) : OpKernel(ctx) {
    int64_t seed;
    OP_REQUIRES_OK(ctx, ctx->GetAttr("dim", &dim_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("seed", &seed));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("chunk", &chunk_));
    OP_REQUIRES(ctx, chunk_ == 0 || dim_ % chunk_ == 0,
                InvalidArgument("chunk size Z=", chunk_, " must divide dim=", dim_));
    params_ = ParamsFromSeed(seed);
  }

 protected:
  // Memory sizes must be in [1, 2^32]: h has 32 bits.
  static Status CheckMemorySize(int64_t m) {
    if (m < 1 || m > (int64_t{1} << 32)) {
      return InvalidArgument("memory size must be in [1, 2^32], got ", m);
    }
    return Status();
  }

  // Ids must be non-negative (the rows of the virtual table).
  template <typename Tid>
  static Status CheckIds(const Tensor& ids) {
    const auto flat = ids.flat<Tid>();
    for (int64_t i = 0; i < flat.size(); ++i) {
      if (flat(i) < 0) {
        return InvalidArgument("ids must be non-negative; ids[", i, "] = ", flat(i));
      }
    }
    return Status();
  }

  int64_t dim_;
  int64_t chunk_;
  HashParams params_;
};

template <typename Device, typename Tid>
class LookupOp : public HashedEmbeddingBase {
 public:
  using HashedEmbeddingBase::HashedEmbeddingBase;

  void Compute(OpKernelContext* ctx) override {
    const Tensor& memory = ctx->input(0);
    const Tensor& ids = ctx->input(1);
    OP_REQUIRES(ctx, memory.dims() == 1,
                InvalidArgument("memory must be a vector, got shape ",
                                memory.shape().DebugString()));
    OP_REQUIRES_OK(ctx, CheckMemorySize(memory.NumElements()));
    if (Device::kChecksIds) OP_REQUIRES_OK(ctx, CheckIds<Tid>(ids));
    const int64_t n = ids.NumElements();
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({n, dim_}), &out));
    OP_REQUIRES_OK(ctx, Device::template Lookup<Tid>(
                            ctx, memory.flat<float>().data(),
                            static_cast<uint64_t>(memory.NumElements()),
                            ids.flat<Tid>().data(), n, dim_, chunk_, params_,
                            out->flat<float>().data()));
  }
};

template <typename Device, typename Tid>
class LookupGradOp : public HashedEmbeddingBase {
 public:
  using HashedEmbeddingBase::HashedEmbeddingBase;

  void Compute(OpKernelContext* ctx) override {
    const Tensor& grad = ctx->input(0);
    const Tensor& ids = ctx->input(1);
    const int64_t m = ctx->input(2).scalar<int64_t>()();
    OP_REQUIRES_OK(ctx, CheckMemorySize(m));
    if (Device::kChecksIds) OP_REQUIRES_OK(ctx, CheckIds<Tid>(ids));
    const int64_t n = ids.NumElements();
    OP_REQUIRES(ctx, grad.dims() == 2 && grad.dim_size(0) == n && grad.dim_size(1) == dim_,
                InvalidArgument("grad must have shape [", n, ", ", dim_, "], got ",
                                grad.shape().DebugString()));
    Tensor* slots = nullptr;
    Tensor* values = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({n * dim_}), &slots));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(1, TensorShape({n * dim_}), &values));
    OP_REQUIRES_OK(ctx, Device::template LookupGrad<Tid>(
                            ctx, grad.flat<float>().data(), ids.flat<Tid>().data(), n,
                            dim_, chunk_, static_cast<uint64_t>(m), params_,
                            slots->flat<int64_t>().data(), values->flat<float>().data()));
  }
};

// Per-device aliases: REGISTER_KERNEL_BUILDER cannot take a comma in a type.
template <typename Tid>
using CpuLookupOp = LookupOp<CpuDevice, Tid>;
template <typename Tid>
using CpuLookupGradOp = LookupGradOp<CpuDevice, Tid>;
#if GOOGLE_CUDA
template <typename Tid>
using GpuLookupOp = LookupOp<GpuDevice, Tid>;
template <typename Tid>
using GpuLookupGradOp = LookupGradOp<GpuDevice, Tid>;
#endif  // GOOGLE_CUDA

#define REGISTER(DEVICE_NAME, Prefix, Tid)                                    \
  REGISTER_KERNEL_BUILDER(Name("HashedEmbeddingLookup")                       \
                              .Device(DEVICE_NAME)                            \
                              .TypeConstraint<Tid>("Tid"),                    \
                          Prefix##LookupOp<Tid>);                             \
  REGISTER_KERNEL_BUILDER(Name("HashedEmbeddingLookupGrad")                   \
                              .Device(DEVICE_NAME)                            \
                              .HostMemory("memory_size")                      \
                              .TypeConstraint<Tid>("Tid"),                    \
                          Prefix##LookupGradOp<Tid>);
REGISTER(::tensorflow::DEVICE_CPU, Cpu, int32_t)
REGISTER(::tensorflow::DEVICE_CPU, Cpu, int64_t)
#if GOOGLE_CUDA
REGISTER(::tensorflow::DEVICE_GPU, Gpu, int32_t)
REGISTER(::tensorflow::DEVICE_GPU, Gpu, int64_t)
#endif  // GOOGLE_CUDA
#undef REGISTER

}  // namespace tff_rec
