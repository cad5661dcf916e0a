// The parts of PyTorch's PrivateUse1 runtime interface that a device written in Python cannot provide through
// torch._C._acc, or only at a price: resizing a storage in place, generators on the device, the pinned host memory
// the accelerator owns, an allocator for the storages torch itself makes on the device, and the device guard. Built and loaded by neuron_mlir/frontend/device/native/__init__.py (ctypes, no pybind11);
// the device's memory itself stays in Python (storage.py), which this library calls back into. It also serves the
// metadata-only view ops (`view`, `as_strided`, ...) without a call into Python.
#include <Python.h>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Generator.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/Allocator.h>
#include <c10/core/impl/alloc_cpu.h>
#include <c10/core/Storage.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/csrc/Dtype.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/Generator.h>
#include <torch/csrc/Storage.h>
#include <torch/library.h>

#include <algorithm>
#include <cstring>
#include <vector>
#include <map>
#include <mutex>

namespace neuron {
namespace {

constexpr c10::DeviceType kDevice = c10::DeviceType::PrivateUse1;

// (storage, nbytes) -> address of the storage's new bytes: set by the Python side before any resize can happen
PyObject* resize_callback = nullptr;
// nbytes -> (address, owner): a block of device memory and the Python object whose life is the block's
PyObject* allocate_callback = nullptr;

[[noreturn]] void raise_python_error(PyGILState_STATE state) {
  python_error error;  // keeps the Python exception (torch.OutOfMemoryError) for torch to raise again
  error.persist();
  PyGILState_Release(state);
  throw error;
}

void release_owner(void* owner) {
  if (!Py_IsInitialized()) {
    return;  // storages that outlive the interpreter: its memory is gone with it
  }
  PyGILState_STATE state = PyGILState_Ensure();
  Py_DECREF(static_cast<PyObject*>(owner));
  PyGILState_Release(state);
}

// torch's own allocations on the device (`torch.UntypedStorage(n, device="neuron")`, storage copies) take
// blocks of the same device memory as the device's tensors; the DataPtr holds the block's owner.
class DeviceAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t nbytes) override {
    PyGILState_STATE state = PyGILState_Ensure();
    PyObject* result = PyObject_CallFunction(allocate_callback, "n", static_cast<Py_ssize_t>(nbytes));
    if (result == nullptr) {
      raise_python_error(state);
    }
    void* address = PyLong_AsVoidPtr(PyTuple_GetItem(result, 0));
    PyObject* owner = PyTuple_GetItem(result, 1);
    Py_INCREF(owner);
    Py_DECREF(result);
    PyGILState_Release(state);
    return {address, owner, &release_owner, c10::Device(kDevice, 0)};
  }

  c10::DeleterFnPtr raw_deleter() const override {
    return nullptr;  // no raw allocations: every block needs its owner
  }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }
};

DeviceAllocator device_allocator;

// A generator on the device: the CPU's Mersenne Twister (the device draws its random numbers on the host),
// labelled with the device so that torch accepts it for device tensors and reports its device.
class DeviceGenerator final : public at::CPUGeneratorImpl {
 public:
  explicit DeviceGenerator(uint64_t seed = c10::default_rng_seed_val) : at::CPUGeneratorImpl(seed) {
    device_ = c10::Device(kDevice, 0);
    key_set_ = c10::DispatchKeySet(c10::DispatchKey::PrivateUse1);
  }

 private:
  DeviceGenerator* clone_impl() const override {
    auto* copy = new DeviceGenerator();
    copy->set_state(*get_state());
    return copy;
  }
};

// Host memory the device owns as "pinned": ordinary pages (the simulator's DMA reads host memory directly),
// remembered so that is_pinned() can tell them from other host memory.
class PinnedAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t nbytes) override {
    void* data = nbytes ? c10::alloc_cpu(nbytes) : nullptr;
    if (data) {
      std::lock_guard<std::mutex> lock(mutex_);
      blocks_[reinterpret_cast<uintptr_t>(data)] = nbytes;
    }
    return {data, data, &release, c10::Device(c10::DeviceType::CPU)};
  }

  c10::DeleterFnPtr raw_deleter() const override {
    return &release;
  }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }

  bool contains(const void* pointer) const {
    auto address = reinterpret_cast<uintptr_t>(pointer);
    std::lock_guard<std::mutex> lock(mutex_);
    auto after = blocks_.upper_bound(address);  // the first block starting past the address
    if (after == blocks_.begin()) {
      return false;
    }
    --after;
    return address < after->first + after->second;
  }

 private:
  static void release(void* data);
  mutable std::mutex mutex_;
  std::map<uintptr_t, size_t> blocks_;  // start address -> bytes
};

PinnedAllocator pinned_allocator;

void PinnedAllocator::release(void* data) {
  {
    std::lock_guard<std::mutex> lock(pinned_allocator.mutex_);
    pinned_allocator.blocks_.erase(reinterpret_cast<uintptr_t>(data));
  }
  c10::free_cpu(data);
}

const at::Generator& default_generator() {
  static at::Generator generator = at::make_generator<DeviceGenerator>();
  return generator;
}

struct Hooks final : public at::PrivateUse1HooksInterface {
  bool isBuilt() const override {
    return true;
  }
  bool isAvailable() const override {
    return true;
  }
  bool hasPrimaryContext(c10::DeviceIndex) const override {
    return true;
  }
  c10::DeviceIndex deviceCount() const override {
    return 1;
  }
  c10::DeviceIndex getCurrentDevice() const override {
    return 0;
  }
  void setCurrentDevice(c10::DeviceIndex device) const override {
    TORCH_CHECK(device == 0, "neuron:", static_cast<int>(device), " does not exist: one NeuronCore per process");
  }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex device) const override {
    setCurrentDevice(device);
    return 0;
  }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex device) const override {
    return 0;
  }
  const at::Generator& getDefaultGenerator(c10::DeviceIndex) const override {
    return default_generator();
  }
  at::Generator getNewGenerator(c10::DeviceIndex) const override {
    return at::make_generator<DeviceGenerator>();
  }
  at::Allocator* getPinnedMemoryAllocator() const override {
    return &pinned_allocator;
  }
  bool isPinnedPtr(const void* data) const override {
    return pinned_allocator.contains(data);
  }

  // The storage's bytes move to a new block of device memory of `newsize` bytes (its first bytes kept), which
  // the Python side allocates and hangs on the storage's Python object; here the storage is pointed at it.
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t newsize) const override {
    TORCH_CHECK(resize_callback != nullptr, "the neuron device's storage resize is not initialised");
    void* address = nullptr;
    {
      PyGILState_STATE state = PyGILState_Ensure();
      PyObject* wrapped = THPStorage_Wrap(storage);
      PyObject* result = wrapped == nullptr
          ? nullptr
          : PyObject_CallFunction(resize_callback, "On", wrapped, static_cast<Py_ssize_t>(newsize));
      Py_XDECREF(wrapped);
      if (result == nullptr) {
        raise_python_error(state);
      }
      address = PyLong_AsVoidPtr(result);
      Py_DECREF(result);
      PyGILState_Release(state);
    }
    auto* impl = storage.unsafeGetStorageImpl();
    // the block is owned by the storage's Python object, so the pointer does not own it
    impl->set_data_ptr_noswap(c10::DataPtr(address, c10::Device(kDevice, 0)));
    impl->set_nbytes(newsize);
  }
};

Hooks hooks;

// The device guard: one device (index 0) with one stream, whose ordering the Python side keeps (streams.py), so
// every switch is a no-op. torch asks a backend's guard for its device type on every guarded kernel call and on
// every node the autograd engine runs (dozens of times per training step of a small model); torch._C._acc's guard
// answers from a Python method, each answer a call into the interpreter, where this one answers in C++.
struct DeviceGuard final : public c10::impl::DeviceGuardImplInterface {
  c10::DeviceType type() const override {
    return kDevice;
  }
  c10::Device exchangeDevice(c10::Device) const override {
    return getDevice();
  }
  c10::Device getDevice() const override {
    return c10::Device(kDevice, 0);
  }
  void setDevice(c10::Device) const override {}
  void uncheckedSetDevice(c10::Device) const noexcept override {}
  c10::Stream getStream(c10::Device) const noexcept override {
    return c10::Stream(c10::Stream::DEFAULT, getDevice());
  }
  c10::Stream getNewStream(c10::Device, int) const override {
    return c10::Stream(c10::Stream::DEFAULT, getDevice());
  }
  c10::Stream exchangeStream(c10::Stream) const noexcept override {
    return c10::Stream(c10::Stream::DEFAULT, getDevice());
  }
  c10::DeviceIndex deviceCount() const noexcept override {
    return 1;
  }
  // events and streams are the Python side's (torch.neuron.Event, streams.py): torch's own see them complete
  void record(void**, const c10::Stream&, const c10::DeviceIndex, const c10::EventFlag) const override {}
  void block(void*, const c10::Stream&) const override {}
  bool queryEvent(void*) const override {
    return true;
  }
  void destroyEvent(void*, const c10::DeviceIndex) const noexcept override {}
  bool queryStream(const c10::Stream&) const override {
    return true;
  }
  void synchronizeStream(const c10::Stream&) const override {}
};

DeviceGuard device_guard;

// A view op on device tensors writes only sizes, strides and the storage offset: the CPU kernel does that over the
// device tensor itself (its storage untouched), as dispatch.neuron_fallback does for the ops not registered here.
void metadata_on_cpu(const c10::OperatorHandle& op, c10::DispatchKeySet, torch::jit::Stack* stack) {
  op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), stack);
}

torch::Library* metadata_library = nullptr;  // lives as long as the process: its registrations are the kernels

}  // namespace
}  // namespace neuron

extern "C" {

// Registers the hooks and the device allocator (once per process); false when another PrivateUse1 runtime
// registered first.
bool neuron_register_hooks(PyObject* resize, PyObject* allocate) {
  if (at::isPrivateUse1HooksRegistered()) {
    return false;
  }
  Py_INCREF(resize);
  Py_INCREF(allocate);
  neuron::resize_callback = resize;
  neuron::allocate_callback = allocate;
  at::RegisterPrivateUse1HooksInterface(&neuron::hooks);
  c10::SetAllocator(c10::DeviceType::PrivateUse1, &neuron::device_allocator);
  return true;
}

// Registers the device guard; false when PrivateUse1 has one already.
bool neuron_register_device_guard() {
  if (c10::impl::hasDeviceGuardImpl(neuron::kDevice)) {
    return false;
  }
  c10::impl::registerDeviceGuard(neuron::kDevice, &neuron::device_guard);
  return true;
}

// Registers `metadata_on_cpu` as the device's kernel of each aten op in `names` (a list of "name.overload"
// strings); false (a Python exception set) when an entry is not a string or torch refuses a registration, the
// ones before it staying registered.
bool neuron_register_metadata_kernels(PyObject* names) {
  PyGILState_STATE state = PyGILState_Ensure();
  bool done = true;
  try {
    if (neuron::metadata_library == nullptr) {
      neuron::metadata_library = new torch::Library(
          torch::Library::IMPL, "aten", c10::DispatchKey::PrivateUse1, __FILE__, __LINE__);
    }
    Py_ssize_t count = PyList_Size(names);
    for (Py_ssize_t index = 0; index < count && done; ++index) {
      const char* name = PyUnicode_AsUTF8(PyList_GetItem(names, index));
      if (name == nullptr) {
        done = false;
        break;
      }
      neuron::metadata_library->impl(
          name, torch::CppFunction::makeFromBoxedFunction<&neuron::metadata_on_cpu>());
    }
  } catch (const std::exception& error) {
    PyErr_SetString(PyExc_RuntimeError, error.what());
    done = false;
  }
  PyGILState_Release(state);
  return done;
}

// A new contiguous device tensor of `shape` (a tuple of ints) and `dtype` (a torch.dtype) over the start of device
// storage `storage` (an untyped storage the caller has made big enough): what storage.empty_array otherwise makes
// from an empty tensor and `set_`'s CPU kernel (a tenth of a fresh result's cost). A new reference, or nullptr
// with a Python exception set.
PyObject* neuron_tensor_over(PyObject* storage, PyObject* shape, PyObject* dtype) {
  try {
    if (!THPStorage_Check(storage) || !THPDtype_Check(dtype) || !PyTuple_Check(shape)) {
      PyErr_SetString(PyExc_TypeError, "neuron_tensor_over takes a storage, a tuple of sizes and a dtype");
      return nullptr;
    }
    Py_ssize_t rank = PyTuple_GET_SIZE(shape);
    std::vector<int64_t> sizes(rank);
    std::vector<int64_t> strides(rank);
    int64_t stride = 1;
    int64_t numel = 1;
    for (Py_ssize_t axis = rank - 1; axis >= 0; --axis) {
      int64_t size = PyLong_AsLongLong(PyTuple_GET_ITEM(shape, axis));
      if (size == -1 && PyErr_Occurred()) {
        return nullptr;
      }
      TORCH_CHECK(size >= 0, "neuron_tensor_over: a negative size");
      sizes[axis] = size;
      strides[axis] = stride;
      stride *= std::max<int64_t>(size, 1);
      numel *= size;
    }
    auto scalar_type = reinterpret_cast<THPDtype*>(dtype)->scalar_type;
    c10::Storage stored = THPStorage_Unpack(storage);
    TORCH_CHECK(stored.device_type() == neuron::kDevice, "neuron_tensor_over: the storage is not on the device");
    TORCH_CHECK(
        static_cast<int64_t>(stored.nbytes()) >= numel * static_cast<int64_t>(c10::elementSize(scalar_type)),
        "neuron_tensor_over: the storage is too small for the tensor");
    at::Tensor tensor = at::detail::make_tensor<at::TensorImpl>(
        std::move(stored), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), c10::scalarTypeToTypeMeta(scalar_type));
    tensor.unsafeGetTensorImpl()->set_sizes_and_strides(sizes, strides, 0);
    return THPVariable_Wrap(std::move(tensor));
  } catch (const std::exception& error) {
    PyErr_SetString(PyExc_RuntimeError, error.what());
    return nullptr;
  }
}

// The device's default generator as a torch.Generator (a new reference).
PyObject* neuron_default_generator() {
  return THPGenerator_initDefaultGenerator(neuron::default_generator());
}

}  // extern "C"
