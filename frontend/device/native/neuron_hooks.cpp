// The parts of PyTorch's PrivateUse1 runtime interface that a device written in Python cannot provide through
// torch._C._acc, or only at a price: resizing a storage in place, generators on the device, the pinned host memory
// the accelerator owns, an allocator for the storages torch itself makes on the device, and the device guard. Built and loaded by neuron_mlir/frontend/device/native/__init__.py (ctypes, no pybind11);
// the storages over the device's memory stay in Python (storage.py), which this library calls back into. It also
// serves the metadata-only view ops (`view`, `as_strided`, ...) without a call into Python, holds the HBM's
// address space (the blocks' ranges and the memory counters), and makes contiguous `empty` tensors and replays
// constant fills in C++ (the loss gradient's `ones_like`).
#include <Python.h>
#include <structmember.h>

// NumPy's C API (headers of the installed NumPy, whose version is part of the library's cache key): a block's bytes
// and a fresh result's typed array made without a call into Python each. `import_array` runs with the first address
// space (`numpy_api_ready`).
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#define PY_ARRAY_UNIQUE_SYMBOL neuron_hooks_ARRAY_API
#include <numpy/arrayobject.h>
#if NPY_ABI_VERSION < 0x02000000  // NumPy 1.x (pyproject allows 1.26): the item size is a field of the descriptor
#define PyDataType_ELSIZE(descr) ((descr)->elsize)
#endif

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Generator.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <ATen/native/transformers/attention.h>
#include <ATen/native/transformers/sdp_utils_cpp.h>
#include <ATen/ops/_fused_sdp_choice_native.h>
#include <c10/core/Allocator.h>
#include <c10/core/impl/alloc_cpu.h>
#include <c10/core/Storage.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/csrc/Dtype.h>
#include <torch/csrc/DynamicTypes.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/Generator.h>
#include <torch/csrc/Storage.h>
#include <torch/csrc/utils/tensor_memoryformats.h>
#include <torch/library.h>
#include <c10/core/DefaultDtype.h>

#include <algorithm>
#include <cstring>
#include <vector>
#include <map>
#include <string>
#include <unordered_map>
#include <mutex>
#include <tuple>

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

// ---- the device's HBM address space ----
// The first-fit allocator of runtime/device_memory.py (free ranges in address order, neighbours merged when a block
// is freed, exact counters) as a Python type: allocating a block and giving its range back run no Python code, so an
// eager op's fresh result costs one call, and a dying block's range returns from its deallocation without a Python
// `__del__`. A block's `data` is a NumPy uint8 array of exactly the requested size, as the Python blocks' is; a fresh
// result's bytes are its typed array's memory, and its block makes `data` over them on first use.

// NumPy's C API, imported once (false with a Python exception set when NumPy cannot be imported).
bool numpy_api_ready() {
  static bool ready = false;
  if (!ready) {
    if (_import_array() < 0) {
      return false;
    }
    ready = true;
  }
  return true;
}

struct SpaceObject {
  PyObject_HEAD
  int64_t capacity;
  int64_t alignment;
  std::map<int64_t, int64_t>* free_ranges;  // start -> size, address order
  int64_t allocated_bytes, reserved_bytes, peak_allocated_bytes, peak_reserved_bytes;
  int64_t allocations, frees, live_blocks;
};

struct BlockObject {
  PyObject_HEAD
  PyObject* space;  // the SpaceObject its range belongs to (a strong reference, kept after the release)
  PyObject* owner;  // the NumPy array whose memory the bytes are: `data`, or a fresh result's typed array
  PyObject* data;  // the block's bytes as a uint8 array of `nbytes`, made on first use when `owner` is not one
  PyObject* weakrefs;
  int64_t address, nbytes, reserved;
  void* pointer;  // where `data`'s bytes are in host memory
  bool alive;  // its range is still taken
};

PyTypeObject* space_type = nullptr;
PyTypeObject* block_type = nullptr;

void give_back(SpaceObject* space, int64_t address, int64_t nbytes, int64_t reserved) {
  auto& ranges = *space->free_ranges;
  auto next = ranges.lower_bound(address);
  bool merges_next = next != ranges.end() && address + reserved == next->first;
  bool merges_previous = false;
  auto previous = next;
  if (next != ranges.begin()) {
    --previous;
    merges_previous = previous->first + previous->second == address;
  }
  if (merges_previous) {
    previous->second += reserved;
    if (merges_next) {
      previous->second += next->second;
      ranges.erase(next);
    }
  } else if (merges_next) {
    int64_t size = next->second + reserved;
    ranges.erase(next);
    ranges.emplace(address, size);
  } else {
    ranges.emplace(address, reserved);
  }
  space->allocated_bytes -= nbytes;
  space->reserved_bytes -= reserved;
  space->frees += 1;
  space->live_blocks -= 1;
}

void release_block(BlockObject* block) {
  if (block->alive) {
    block->alive = false;
    give_back(reinterpret_cast<SpaceObject*>(block->space), block->address, block->nbytes, block->reserved);
  }
}

void block_dealloc(PyObject* self) {
  auto* block = reinterpret_cast<BlockObject*>(self);
  PyTypeObject* type = Py_TYPE(self);
  if (block->weakrefs != nullptr) {
    PyObject_ClearWeakRefs(self);
  }
  release_block(block);
  Py_XDECREF(block->data);
  Py_XDECREF(block->owner);
  Py_XDECREF(block->space);
  type->tp_free(self);
  Py_DECREF(type);
}

PyObject* block_release(PyObject* self, PyObject*) {
  release_block(reinterpret_cast<BlockObject*>(self));
  Py_RETURN_NONE;
}

PyObject* block_alive(PyObject* self, void*) {
  return PyBool_FromLong(reinterpret_cast<BlockObject*>(self)->alive);
}

PyObject* block_owner(PyObject* self, void*) {
  auto* block = reinterpret_cast<BlockObject*>(self);
  PyObject* owner = block->alive ? block->space : Py_None;
  Py_INCREF(owner);
  return owner;
}

// `block.data`: the uint8 array over the block's bytes, made on first use over its owner's memory (most fresh
// results are read and written through their typed array alone)
PyObject* block_data(PyObject* self, void*) {
  auto* block = reinterpret_cast<BlockObject*>(self);
  if (block->data == nullptr) {
    npy_intp length = static_cast<npy_intp>(block->nbytes);
    PyObject* data = PyArray_New(
        &PyArray_Type, 1, &length, NPY_UINT8, nullptr, block->pointer, 0, NPY_ARRAY_CARRAY, nullptr);
    if (data == nullptr) {
      return nullptr;
    }
    Py_INCREF(block->owner);
    if (PyArray_SetBaseObject(reinterpret_cast<PyArrayObject*>(data), block->owner) != 0) {
      Py_DECREF(data);
      return nullptr;
    }
    block->data = data;
  }
  return Py_NewRef(block->data);
}

PyObject* block_repr(PyObject* self) {
  auto* block = reinterpret_cast<BlockObject*>(self);
  return PyUnicode_FromFormat(
      "Block(address=0x%llx, nbytes=%lld)", static_cast<unsigned long long>(block->address),
      static_cast<long long>(block->nbytes));
}

PyMethodDef block_methods[] = {
    {"release", block_release, METH_NOARGS, "Give the block's range back now (nothing when it is given back)."},
    {nullptr, nullptr, 0, nullptr}};
PyGetSetDef block_getset[] = {
    {"alive", block_alive, nullptr, "Whether its range is still taken.", nullptr},
    {"space", block_owner, nullptr, "The address space its range is taken from, None once given back.", nullptr},
    {"data", block_data, nullptr, "Its bytes: a uint8 array of `nbytes`.", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr}};
PyMemberDef block_members[] = {
    {"address", T_LONGLONG, offsetof(BlockObject, address), READONLY, nullptr},
    {"nbytes", T_LONGLONG, offsetof(BlockObject, nbytes), READONLY, nullptr},
    {"reserved", T_LONGLONG, offsetof(BlockObject, reserved), READONLY, nullptr},
    {"__weaklistoffset__", T_PYSSIZET, offsetof(BlockObject, weakrefs), READONLY, nullptr},
    {nullptr, 0, 0, 0, nullptr}};
PyType_Slot block_slots[] = {
    {Py_tp_dealloc, reinterpret_cast<void*>(block_dealloc)},
    {Py_tp_repr, reinterpret_cast<void*>(block_repr)},
    {Py_tp_methods, block_methods},
    {Py_tp_getset, block_getset},
    {Py_tp_members, block_members},
    {Py_tp_doc, const_cast<char*>("One allocation of the device's HBM: `address`, `nbytes` requested, `data` its bytes.")},
    {0, nullptr}};
PyType_Spec block_spec = {
    "neuron_hooks.Block", sizeof(BlockObject), 0, Py_TPFLAGS_DEFAULT, block_slots};

// The bytes a request of `nbytes` reserves in `space`: whole aligned slots, and one for a zero-byte request, so that
// every live block has its own address.
int64_t reserved_size(const SpaceObject* space, int64_t nbytes) {
  int64_t alignment = space->alignment;
  return std::max(alignment, (nbytes + alignment - 1) / alignment * alignment);
}

// A new Block of `nbytes` of `space` whose bytes are the memory of NumPy array `owner` (at `pointer`; the block takes
// a reference to it), or None when no free range holds it (nothing changed then); nullptr with an exception set.
PyObject* take_block(SpaceObject* space, int64_t nbytes, PyObject* owner, void* pointer) {
  int64_t reserved = reserved_size(space, nbytes);
  auto& ranges = *space->free_ranges;
  auto* block = PyObject_New(BlockObject, block_type);
  if (block == nullptr) {
    return nullptr;
  }
  block->space = nullptr;
  block->owner = Py_NewRef(owner);
  block->data = nullptr;
  block->weakrefs = nullptr;
  block->alive = false;
  block->pointer = pointer;
  block->nbytes = nbytes;
  // (the caller's array's making may have run the garbage collector, whose dying blocks changed the ranges: the
  // search comes after it)
  auto found = std::find_if(ranges.begin(), ranges.end(), [&](const auto& range) { return range.second >= reserved; });
  if (found == ranges.end()) {
    Py_DECREF(reinterpret_cast<PyObject*>(block));
    Py_RETURN_NONE;
  }
  int64_t address = found->first;
  if (found->second == reserved) {
    ranges.erase(found);
  } else {
    int64_t size = found->second - reserved;
    ranges.erase(found);
    ranges.emplace(address + reserved, size);
  }
  space->allocated_bytes += nbytes;
  space->reserved_bytes += reserved;
  space->peak_allocated_bytes = std::max(space->peak_allocated_bytes, space->allocated_bytes);
  space->peak_reserved_bytes = std::max(space->peak_reserved_bytes, space->reserved_bytes);
  space->allocations += 1;
  space->live_blocks += 1;
  Py_INCREF(space);
  block->space = reinterpret_cast<PyObject*>(space);
  block->address = address;
  block->reserved = reserved;
  block->alive = true;
  return reinterpret_cast<PyObject*>(block);
}

// Whether a free range of `space` holds `nbytes` (rounded up as `take_block` rounds them).
bool has_room(SpaceObject* space, int64_t nbytes) {
  int64_t reserved = reserved_size(space, nbytes);
  const auto& ranges = *space->free_ranges;
  return std::any_of(ranges.begin(), ranges.end(), [&](const auto& range) { return range.second >= reserved; });
}

// space.allocate(nbytes) -> a new Block, or None when no free range holds it (nothing changed then)
PyObject* space_allocate(PyObject* self, PyObject* argument) {
  auto* space = reinterpret_cast<SpaceObject*>(self);
  int64_t nbytes = PyLong_AsLongLong(argument);
  if (nbytes == -1 && PyErr_Occurred()) {
    return nullptr;
  }
  if (nbytes < 0) {
    PyErr_Format(PyExc_ValueError, "cannot allocate a negative number of bytes (%lld)", static_cast<long long>(nbytes));
    return nullptr;
  }
  if (!has_room(space, nbytes)) {
    Py_RETURN_NONE;
  }
  // the bytes first: a failure leaves the space as it was
  npy_intp length = static_cast<npy_intp>(nbytes);
  PyObject* data = PyArray_SimpleNew(1, &length, NPY_UINT8);
  if (data == nullptr) {
    return nullptr;
  }
  PyObject* block = take_block(space, nbytes, data, PyArray_DATA(reinterpret_cast<PyArrayObject*>(data)));
  if (block != nullptr && block != Py_None) {
    reinterpret_cast<BlockObject*>(block)->data = data;  // this reference: the owner is its `data` too
  } else {
    Py_DECREF(data);
  }
  return block;
}

PyObject* space_largest_free(PyObject* self, PyObject*) {
  int64_t largest = 0;
  for (const auto& range : *reinterpret_cast<SpaceObject*>(self)->free_ranges) {
    largest = std::max(largest, range.second);
  }
  return PyLong_FromLongLong(largest);
}

PyObject* space_reset_peak(PyObject* self, PyObject*) {
  auto* space = reinterpret_cast<SpaceObject*>(self);
  space->peak_allocated_bytes = space->allocated_bytes;
  space->peak_reserved_bytes = space->reserved_bytes;
  Py_RETURN_NONE;
}

PyObject* space_free_ranges(PyObject* self, PyObject*) {
  auto& ranges = *reinterpret_cast<SpaceObject*>(self)->free_ranges;
  PyObject* result = PyList_New(0);
  for (const auto& range : ranges) {
    if (result == nullptr) {
      return nullptr;
    }
    PyObject* pair = Py_BuildValue("(LL)", static_cast<long long>(range.first), static_cast<long long>(range.second));
    if (pair == nullptr || PyList_Append(result, pair) != 0) {
      Py_XDECREF(pair);
      Py_DECREF(result);
      return nullptr;
    }
    Py_DECREF(pair);
  }
  return result;
}

void space_dealloc(PyObject* self) {
  auto* space = reinterpret_cast<SpaceObject*>(self);
  PyTypeObject* type = Py_TYPE(self);
  delete space->free_ranges;
  type->tp_free(self);
  Py_DECREF(type);
}

PyMethodDef space_methods[] = {
    {"allocate", space_allocate, METH_O, "A new block of nbytes (contents undefined), or None when none fits."},
    {"largest_free", space_largest_free, METH_NOARGS, "The largest free range, in bytes."},
    {"reset_peak", space_reset_peak, METH_NOARGS, "Start measuring the peaks from the current usage."},
    {"free_ranges", space_free_ranges, METH_NOARGS, "The free ranges as (start, size) pairs in address order."},
    {nullptr, nullptr, 0, nullptr}};
PyMemberDef space_members[] = {
    {"capacity", T_LONGLONG, offsetof(SpaceObject, capacity), READONLY, nullptr},
    {"alignment", T_LONGLONG, offsetof(SpaceObject, alignment), READONLY, nullptr},
    {"allocated_bytes", T_LONGLONG, offsetof(SpaceObject, allocated_bytes), READONLY, nullptr},
    {"reserved_bytes", T_LONGLONG, offsetof(SpaceObject, reserved_bytes), READONLY, nullptr},
    {"peak_allocated_bytes", T_LONGLONG, offsetof(SpaceObject, peak_allocated_bytes), READONLY, nullptr},
    {"peak_reserved_bytes", T_LONGLONG, offsetof(SpaceObject, peak_reserved_bytes), READONLY, nullptr},
    {"allocations", T_LONGLONG, offsetof(SpaceObject, allocations), READONLY, nullptr},
    {"frees", T_LONGLONG, offsetof(SpaceObject, frees), READONLY, nullptr},
    {"live_blocks", T_LONGLONG, offsetof(SpaceObject, live_blocks), READONLY, nullptr},
    {nullptr, 0, 0, 0, nullptr}};
PyType_Slot space_slots[] = {
    {Py_tp_dealloc, reinterpret_cast<void*>(space_dealloc)},
    {Py_tp_methods, space_methods},
    {Py_tp_members, space_members},
    {Py_tp_doc, const_cast<char*>("The free ranges and counters of one simulated HBM.")},
    {0, nullptr}};
PyType_Spec space_spec = {
    "neuron_hooks.AddressSpace", sizeof(SpaceObject), 0, Py_TPFLAGS_DEFAULT, space_slots};

// A block of `space` (a native AddressSpace) for `numel` elements of `scalar_type`, a storage over its bytes that
// carries the block as its attribute `attribute` (the block lives as long as the storage), and a tensor of `sizes`
// and `strides` over the storage's start: 1 with `tensor` set and new references to the block and the storage's
// Python object in `block` and `wrapped`; 0 when no free range holds the block (nothing changed); -1 with a Python
// exception set. When `element` is a numpy.dtype of the tensor's item size, the block's bytes are the memory of a
// new C-contiguous array of it and `sizes`, returned (a new reference) in `typed`: the array a result is written and
// read through, made without a byte array and a view of it (the block makes its `data` on first use); else `typed`
// is nullptr.
int fresh_block_tensor(
    PyObject* space, const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides, int64_t numel,
    c10::ScalarType scalar_type, PyObject* attribute, at::Tensor& tensor, PyObject** block, PyObject** wrapped,
    PyObject* element = nullptr, PyObject** typed = nullptr) {
  int64_t nbytes = numel * static_cast<int64_t>(c10::elementSize(scalar_type));
  auto* owned_space = reinterpret_cast<SpaceObject*>(space);
  PyObject* made = nullptr;
  if (typed != nullptr) {
    *typed = nullptr;
  }
  if (typed != nullptr && element != nullptr && PyArray_DescrCheck(element) &&
      PyDataType_ELSIZE(reinterpret_cast<PyArray_Descr*>(element)) ==
          static_cast<npy_intp>(c10::elementSize(scalar_type))) {
    if (!has_room(owned_space, nbytes)) {
      return 0;
    }
    std::vector<npy_intp> dims(sizes.begin(), sizes.end());
    Py_INCREF(element);  // PyArray_NewFromDescr steals the reference
    PyObject* array = PyArray_NewFromDescr(
        &PyArray_Type, reinterpret_cast<PyArray_Descr*>(element), static_cast<int>(dims.size()), dims.data(), nullptr,
        nullptr, 0, nullptr);
    if (array == nullptr) {
      return -1;
    }
    made = take_block(owned_space, nbytes, array, PyArray_DATA(reinterpret_cast<PyArrayObject*>(array)));
    if (made == nullptr || made == Py_None) {
      Py_DECREF(array);
    } else {
      *typed = array;
    }
  } else {
    PyObject* count = PyLong_FromLongLong(nbytes);
    if (count == nullptr) {
      return -1;
    }
    made = space_allocate(space, count);
    Py_DECREF(count);
  }
  if (made == nullptr) {
    return -1;
  }
  if (made == Py_None) {
    Py_DECREF(made);
    return 0;
  }
  c10::Storage stored(
      c10::Storage::use_byte_size_t(), static_cast<size_t>(nbytes),
      c10::DataPtr(reinterpret_cast<BlockObject*>(made)->pointer, c10::Device(kDevice, 0)),
      /*allocator=*/nullptr, /*resizable=*/false);
  PyObject* storage_object = THPStorage_Wrap(stored);
  if (storage_object == nullptr || PyObject_SetAttr(storage_object, attribute, made) != 0) {
    Py_XDECREF(storage_object);
    Py_DECREF(made);
    if (typed != nullptr) {
      Py_CLEAR(*typed);
    }
    return -1;
  }
  tensor = at::detail::make_tensor<at::TensorImpl>(
      std::move(stored), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), c10::scalarTypeToTypeMeta(scalar_type));
  tensor.unsafeGetTensorImpl()->set_sizes_and_strides(sizes, strides, 0);
  *block = made;
  *wrapped = storage_object;
  return 1;
}

// The NumPy array of `element` (a numpy.dtype of the tensor's item size, else the block's bytes viewed by its `view`
// method) and `sizes` over a fresh block's bytes: `typed` itself when given (the array whose memory the block's bytes
// are, `fresh_block_tensor`'s), else an array whose base is the block's bytes. It is kept on the storage `wrapped`
// (its Python object) in a new dict `arrays_attribute` by (0, shape, dtype) as storage.dense_array keeps the arrays
// it makes, when that is given (a result read whole later is found there, not made again): a new reference, None
// when `element` is None, nullptr with a Python exception set.
PyObject* block_array(
    BlockObject* block, PyObject* wrapped, const std::vector<int64_t>& sizes, PyObject* shape, PyObject* dtype,
    PyObject* element, PyObject* arrays_attribute, PyObject* typed = nullptr) {
  if (element == Py_None) {
    return Py_NewRef(Py_None);
  }
  PyObject* array = nullptr;
  auto scalar_type = reinterpret_cast<THPDtype*>(dtype)->scalar_type;
  if (typed != nullptr) {
    array = Py_NewRef(typed);
  } else if (PyArray_DescrCheck(element) && PyDataType_ELSIZE(reinterpret_cast<PyArray_Descr*>(element)) ==
          static_cast<npy_intp>(c10::elementSize(scalar_type))) {
    // the array over the block's bytes in one call (what `data.view(element).reshape(shape)` makes in two), its
    // base the block's bytes, which it keeps alive
    PyObject* data = block_data(reinterpret_cast<PyObject*>(block), nullptr);
    if (data == nullptr) {
      return nullptr;
    }
    std::vector<npy_intp> dims(sizes.begin(), sizes.end());
    Py_INCREF(element);  // PyArray_NewFromDescr steals the reference
    array = PyArray_NewFromDescr(
        &PyArray_Type, reinterpret_cast<PyArray_Descr*>(element), static_cast<int>(dims.size()), dims.data(), nullptr,
        block->pointer, NPY_ARRAY_CARRAY, nullptr);
    if (array != nullptr) {
      if (PyArray_SetBaseObject(reinterpret_cast<PyArrayObject*>(array), data) != 0) {  // steals `data`
        Py_CLEAR(array);
      }
    } else {
      Py_DECREF(data);
    }
  } else {
    PyObject* data = block_data(reinterpret_cast<PyObject*>(block), nullptr);
    PyObject* typed_view = data == nullptr ? nullptr : PyObject_CallMethod(data, "view", "O", element);
    Py_XDECREF(data);
    if (typed_view == nullptr) {
      return nullptr;
    }
    array = PyObject_CallMethod(typed_view, "reshape", "(O)", shape);
    Py_DECREF(typed_view);
  }
  if (array != nullptr && arrays_attribute != nullptr && arrays_attribute != Py_None) {
    static PyObject* zero = PyLong_FromLong(0);
    PyObject* arrays = PyDict_New();
    PyObject* key = arrays == nullptr || zero == nullptr ? nullptr : PyTuple_Pack(3, zero, shape, dtype);
    bool kept = key != nullptr && PyDict_SetItem(arrays, key, array) == 0 &&
        PyObject_SetAttr(wrapped, arrays_attribute, arrays) == 0;
    Py_XDECREF(key);
    Py_XDECREF(arrays);
    if (!kept) {
      Py_CLEAR(array);
    }
  }
  return array;
}

}  // namespace

// The implementation `scaled_dot_product_attention` picks for device tensors: the CPU's choice for the same
// arguments (its fused attention op where the CPU takes it, else the composite's math). Without a choice of the
// device's own torch takes the math for every call on a device other than CUDA's, XPU's and the CPU: in eager
// mode a dozen ops (views, bmm, softmax, the mask's where), and under torch.compile a graph other than the one the
// same model on CPU tensors compiles to.
// A query that is a Python tensor subclass is shown to `attention_subclass_check` (a Python callable, set at
// registration): false keeps the math composite for it (a DTensor: torch gives the CPU's fused op no sharding rule,
// while the composite's ops have them), true takes the CPU's choice (the tracing subclasses of torch.compile).
PyObject* attention_subclass_check = nullptr;

int64_t attention_choice(
    const at::Tensor& query, const at::Tensor& key, const at::Tensor& value, const std::optional<at::Tensor>& attn_mask,
    double dropout_p, bool is_causal, std::optional<double> scale, bool enable_gqa) {
  if (attention_subclass_check != nullptr && query.key_set().has(c10::DispatchKey::Python)) {
    PyGILState_STATE state = PyGILState_Ensure();
    PyObject* wrapped = THPVariable_Wrap(query);
    PyObject* answer = wrapped == nullptr ? nullptr : PyObject_CallOneArg(attention_subclass_check, wrapped);
    int cpus = answer == nullptr ? -1 : PyObject_IsTrue(answer);
    Py_XDECREF(answer);
    Py_XDECREF(wrapped);
    if (cpus < 0) {
      PyErr_Clear();  // the check failed: the composite, which serves every tensor
    }
    PyGILState_Release(state);
    if (cpus != 1) {
      return static_cast<int64_t>(sdp::SDPBackend::math);
    }
  }
  return at::native::_fused_sdp_choice_cpp(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa);
}

}  // namespace neuron

extern "C" {

// Registers `attention_choice` as the device's choice of attention implementation, with `subclass_check` (a
// Python callable taking a tensor subclass's query) deciding for tensor subclasses.
bool neuron_register_attention_choice(PyObject* subclass_check) {
  Py_INCREF(subclass_check);
  Py_XDECREF(neuron::attention_subclass_check);
  neuron::attention_subclass_check = subclass_check;
  at::native::_fused_sdp_choice_stub.set_privateuse1_dispatch_ptr(&neuron::attention_choice);
  return true;
}

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

namespace {

// The sizes, row-major strides and element count of a contiguous tensor of `shape` (a tuple of ints); false with a
// Python exception set when a size is not an int or is negative (`caller` names the function in the message).
struct ContiguousLayout {
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;
  int64_t numel = 1;
};

bool contiguous_layout(PyObject* shape, const char* caller, ContiguousLayout& layout) {
  Py_ssize_t rank = PyTuple_GET_SIZE(shape);
  layout.sizes.assign(rank, 0);
  layout.strides.assign(rank, 0);
  layout.numel = 1;
  int64_t stride = 1;
  for (Py_ssize_t axis = rank - 1; axis >= 0; --axis) {
    int64_t size = PyLong_AsLongLong(PyTuple_GET_ITEM(shape, axis));
    if (size == -1 && PyErr_Occurred()) {
      return false;
    }
    if (size < 0) {
      PyErr_Format(PyExc_ValueError, "%s: a negative size", caller);
      return false;
    }
    layout.sizes[axis] = size;
    layout.strides[axis] = stride;
    stride *= std::max<int64_t>(size, 1);
    layout.numel *= size;
  }
  return true;
}

}  // namespace

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
    ContiguousLayout layout;
    if (!contiguous_layout(shape, "neuron_tensor_over", layout)) {
      return nullptr;
    }
    const auto& [sizes, strides, numel] = layout;
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

// A new address space of `capacity` bytes handed out in multiples of `alignment` (a new reference, or nullptr
// with a Python exception set).
PyObject* neuron_address_space(long long capacity, long long alignment) {
  if (capacity < 0 || alignment <= 0) {
    PyErr_SetString(PyExc_ValueError, "neuron_address_space: a negative capacity or a non-positive alignment");
    return nullptr;
  }
  if (neuron::space_type == nullptr) {
    neuron::space_type = reinterpret_cast<PyTypeObject*>(PyType_FromSpec(&neuron::space_spec));
    neuron::block_type = reinterpret_cast<PyTypeObject*>(PyType_FromSpec(&neuron::block_spec));
    if (neuron::space_type == nullptr || neuron::block_type == nullptr) {
      return nullptr;
    }
  }
  if (!neuron::numpy_api_ready()) {
    return nullptr;
  }
  auto* space = PyObject_New(neuron::SpaceObject, neuron::space_type);
  if (space == nullptr) {
    return nullptr;
  }
  space->capacity = capacity;
  space->alignment = alignment;
  space->free_ranges = new std::map<int64_t, int64_t>();
  if (capacity > 0) {
    space->free_ranges->emplace(0, capacity);
  }
  space->allocated_bytes = space->reserved_bytes = space->peak_allocated_bytes = space->peak_reserved_bytes = 0;
  space->allocations = space->frees = space->live_blocks = 0;
  return reinterpret_cast<PyObject*>(space);
}

// A fresh device result in one call: a block of `space` (an AddressSpace) for a contiguous tensor of `shape` (a
// tuple of ints) and `dtype` (a torch.dtype), a storage over its bytes carrying the block as `attribute` (a str: the
// block lives as long as the storage), the tensor, and a NumPy array of `element` (a numpy.dtype) and `shape` over
// the same bytes (None when `element` is None), kept on the storage under `arrays_attribute` when that is given
// (storage.dense_array's cache of arrays): what storage.empty_array makes in Python. Returns (tensor, array),
// None when the space cannot
// hold the block or is not a native one (the caller's Python path then raises the out-of-memory error, or makes the
// result from its Python space), or nullptr with a Python exception set.
PyObject* neuron_fresh_tensor(
    PyObject* space, PyObject* shape, PyObject* dtype, PyObject* element, PyObject* attribute, PyObject* arrays_attribute) {
  try {
    if (Py_TYPE(space) != neuron::space_type) {
      Py_RETURN_NONE;  // a memory of the Python address space: its Python path makes the result
    }
    if (!THPDtype_Check(dtype) || !PyTuple_Check(shape)) {
      PyErr_SetString(PyExc_TypeError, "neuron_fresh_tensor takes an address space, a tuple of sizes and a dtype");
      return nullptr;
    }
    ContiguousLayout layout;
    if (!contiguous_layout(shape, "neuron_fresh_tensor", layout)) {
      return nullptr;
    }
    const auto& [sizes, strides, numel] = layout;
    auto scalar_type = reinterpret_cast<THPDtype*>(dtype)->scalar_type;
    at::Tensor tensor;
    PyObject* made = nullptr;
    PyObject* wrapped = nullptr;
    PyObject* typed = nullptr;
    int status = neuron::fresh_block_tensor(
        space, sizes, strides, numel, scalar_type, attribute, tensor, &made, &wrapped, element, &typed);
    if (status <= 0) {
      return status < 0 ? nullptr : Py_NewRef(Py_None);
    }
    PyObject* array = neuron::block_array(
        reinterpret_cast<neuron::BlockObject*>(made), wrapped, sizes, shape, dtype, element, arrays_attribute, typed);
    Py_XDECREF(typed);
    Py_DECREF(made);
    Py_DECREF(wrapped);  // torch keeps the storage's Python object (and what hangs on it) while the storage lives
    if (array == nullptr) {
      return nullptr;
    }
    PyObject* result = PyTuple_New(2);
    if (result == nullptr) {
      Py_DECREF(array);
      return nullptr;
    }
    PyTuple_SET_ITEM(result, 0, THPVariable_Wrap(std::move(tensor)));
    PyTuple_SET_ITEM(result, 1, array);
    return result;
  } catch (const std::exception& error) {
    PyErr_SetString(PyExc_RuntimeError, error.what());
    return nullptr;
  }
}

namespace {
PyObject* fresh_tensor_fastcall(PyObject*, PyObject* const* args, Py_ssize_t count) {
  if (count != 5 && count != 6) {
    PyErr_SetString(
        PyExc_TypeError, "fresh_tensor(space, shape, dtype, element, attribute[, arrays_attribute]) takes 5 or 6 arguments");
    return nullptr;
  }
  return neuron_fresh_tensor(args[0], args[1], args[2], args[3], args[4], count == 6 ? args[5] : nullptr);
}
PyMethodDef fresh_tensor_method = {
    "fresh_tensor", reinterpret_cast<PyCFunction>(reinterpret_cast<void*>(fresh_tensor_fastcall)), METH_FASTCALL,
    "fresh_tensor(space, shape, dtype, element, attribute[, arrays_attribute]) -> (tensor, array) | None"};
}  // namespace

// `neuron_fresh_tensor` as a builtin function (a new reference): a call costs what a builtin's does, not a ctypes
// call's conversions.
PyObject* neuron_fresh_tensor_function() {
  return PyCFunction_New(&fresh_tensor_method, nullptr);
}

namespace {
// fresh_tensors(space, layouts, attribute, arrays_attribute) -> [(tensor, array), ...] | None: `neuron_fresh_tensor`
// for each (shape, dtype, element) of the sequence `layouts`, in one call (a compiled graph's device outputs, dozens a
// call). None, every block made so far given back, when the space cannot hold one of them or is not a native one.
PyObject* fresh_tensors_fastcall(PyObject*, PyObject* const* args, Py_ssize_t count) {
  if (count != 4) {
    PyErr_SetString(PyExc_TypeError, "fresh_tensors(space, layouts, attribute, arrays_attribute) takes 4 arguments");
    return nullptr;
  }
  PyObject* layouts = PySequence_Fast(args[1], "fresh_tensors: layouts must be a sequence");
  if (layouts == nullptr) {
    return nullptr;
  }
  Py_ssize_t length = PySequence_Fast_GET_SIZE(layouts);
  PyObject* results = PyList_New(length);
  for (Py_ssize_t index = 0; results != nullptr && index < length; ++index) {
    PyObject* layout = PySequence_Fast_GET_ITEM(layouts, index);
    if (!PyTuple_Check(layout) || PyTuple_GET_SIZE(layout) != 3) {
      PyErr_SetString(PyExc_TypeError, "fresh_tensors: each layout is a (shape, dtype, element) tuple");
      Py_CLEAR(results);
      break;
    }
    PyObject* made = neuron_fresh_tensor(
        args[0], PyTuple_GET_ITEM(layout, 0), PyTuple_GET_ITEM(layout, 1), PyTuple_GET_ITEM(layout, 2), args[2],
        args[3]);
    if (made == nullptr || made == Py_None) {
      Py_DECREF(results);  // the results made so far die, and their blocks with them
      results = made;
      break;
    }
    PyList_SET_ITEM(results, index, made);
  }
  Py_DECREF(layouts);
  return results;
}
PyMethodDef fresh_tensors_method = {
    "fresh_tensors", reinterpret_cast<PyCFunction>(reinterpret_cast<void*>(fresh_tensors_fastcall)), METH_FASTCALL,
    "fresh_tensors(space, layouts, attribute, arrays_attribute) -> [(tensor, array), ...] | None"};
}  // namespace

// `fresh_tensors_fastcall` as a builtin function (a new reference).
PyObject* neuron_fresh_tensors_function() {
  return PyCFunction_New(&fresh_tensors_method, nullptr);
}

namespace {
// tensor_facts(tensor, attribute) -> (block, storage, storage_offset, contiguous, plain): what a deferred region
// asks of every operand and written tensor (region.py), in one call where the tensor's Python methods are one call
// each, each parsing its arguments: its storage's Python object, that object's attribute `attribute` (the HBM block;
// None when it has none), the storage offset in elements, whether it is contiguous, and whether it is neither a
// conjugate nor a negative view (its bytes are its values). None for a tensor without a storage (a wrapper
// subclass): the caller asks the tensor itself.
PyObject* tensor_facts_fastcall(PyObject*, PyObject* const* args, Py_ssize_t count) {
  if (count != 2 || !THPVariable_Check(args[0])) {
    PyErr_SetString(PyExc_TypeError, "tensor_facts(tensor, attribute) takes a tensor and an attribute name");
    return nullptr;
  }
  const at::Tensor& tensor = THPVariable_Unpack(args[0]);
  if (!tensor.defined() || !tensor.has_storage()) {
    Py_RETURN_NONE;
  }
  PyObject* stored = nullptr;
  int64_t offset = 0;
  bool contiguous = false;
  bool plain = false;
  try {
    stored = THPStorage_Wrap(tensor.storage());
    offset = tensor.storage_offset();
    contiguous = tensor.is_contiguous();
    plain = !tensor.is_conj() && !tensor.is_neg();
  } catch (const std::exception&) {
    Py_XDECREF(stored);
    Py_RETURN_NONE;  // the tensor's own methods give the facts (or the error)
  }
  if (stored == nullptr) {
    return nullptr;
  }
  PyObject* block = PyObject_GetAttr(stored, args[1]);
  if (block == nullptr) {
    if (!PyErr_ExceptionMatches(PyExc_AttributeError)) {
      Py_DECREF(stored);
      return nullptr;
    }
    PyErr_Clear();
    block = Py_NewRef(Py_None);
  }
  PyObject* start = PyLong_FromLongLong(offset);
  PyObject* result = start == nullptr ? nullptr : PyTuple_New(5);
  if (result == nullptr) {
    Py_XDECREF(start);
    Py_DECREF(block);
    Py_DECREF(stored);
    return nullptr;
  }
  PyTuple_SET_ITEM(result, 0, block);
  PyTuple_SET_ITEM(result, 1, stored);
  PyTuple_SET_ITEM(result, 2, start);
  PyTuple_SET_ITEM(result, 3, Py_NewRef(contiguous ? Py_True : Py_False));
  PyTuple_SET_ITEM(result, 4, Py_NewRef(plain ? Py_True : Py_False));
  return result;
}
PyMethodDef tensor_facts_method = {
    "tensor_facts", reinterpret_cast<PyCFunction>(reinterpret_cast<void*>(tensor_facts_fastcall)), METH_FASTCALL,
    "tensor_facts(tensor, attribute) -> (block, storage, storage_offset, contiguous, plain) | None"};
}  // namespace

// `tensor_facts_fastcall` as a builtin function (a new reference).
PyObject* neuron_tensor_facts_function() {
  return PyCFunction_New(&tensor_facts_method, nullptr);
}

namespace {
// cached_array(tensor, arrays_attribute) -> array | None: the NumPy array storage.dense_array keeps for contiguous
// `tensor` on its storage's dict `arrays_attribute`, by (storage offset, shape, dtype), without the tensor's Python
// methods; None when the tensor is not contiguous, is a conjugate or negative view, has no storage, or no array is
// kept for it (storage.dense_array then makes it).
PyObject* cached_array_of(PyObject* tensor_object, PyObject* arrays_attribute) {
  const at::Tensor& tensor = THPVariable_Unpack(tensor_object);
  PyObject* stored = nullptr;
  int64_t offset = 0;
  std::vector<int64_t> sizes;
  try {
    if (!tensor.defined() || !tensor.has_storage() || !tensor.is_contiguous() || tensor.is_conj() ||
        tensor.is_neg()) {
      Py_RETURN_NONE;
    }
    offset = tensor.storage_offset();
    sizes = tensor.sizes().vec();
    stored = THPStorage_Wrap(tensor.storage());
  } catch (const std::exception&) {
    Py_XDECREF(stored);
    Py_RETURN_NONE;  // the tensor's own methods give the answer (or the error)
  }
  if (stored == nullptr) {
    return nullptr;
  }
  PyObject* arrays = PyObject_GetAttr(stored, arrays_attribute);
  Py_DECREF(stored);
  if (arrays == nullptr) {
    if (!PyErr_ExceptionMatches(PyExc_AttributeError)) {
      return nullptr;
    }
    PyErr_Clear();
    Py_RETURN_NONE;
  }
  if (!PyDict_Check(arrays)) {
    Py_DECREF(arrays);
    Py_RETURN_NONE;
  }
  // the key as storage.dense_array makes it: a plain tuple of the sizes hashes and compares as the torch.Size
  PyObject* shape = PyTuple_New(static_cast<Py_ssize_t>(sizes.size()));
  for (size_t axis = 0; shape != nullptr && axis < sizes.size(); ++axis) {
    PyObject* size = PyLong_FromLongLong(sizes[axis]);
    if (size == nullptr) {
      Py_CLEAR(shape);
      break;
    }
    PyTuple_SET_ITEM(shape, static_cast<Py_ssize_t>(axis), size);
  }
  PyObject* dtype = reinterpret_cast<PyObject*>(torch::getTHPDtype(tensor.scalar_type()));  // borrowed
  PyObject* key = shape == nullptr ? nullptr : Py_BuildValue("(LNO)", static_cast<long long>(offset), shape, dtype);
  if (key == nullptr) {
    Py_DECREF(arrays);
    return nullptr;
  }
  PyObject* found = PyDict_GetItemWithError(arrays, key);  // borrowed
  Py_DECREF(key);
  if (found == nullptr) {
    Py_DECREF(arrays);
    if (PyErr_Occurred()) {
      return nullptr;
    }
    Py_RETURN_NONE;
  }
  Py_INCREF(found);
  Py_DECREF(arrays);
  return found;
}
PyObject* cached_array_fastcall(PyObject*, PyObject* const* args, Py_ssize_t count) {
  if (count != 2 || !THPVariable_Check(args[0])) {
    PyErr_SetString(PyExc_TypeError, "cached_array(tensor, arrays_attribute) takes a tensor and an attribute name");
    return nullptr;
  }
  return cached_array_of(args[0], args[1]);
}
PyMethodDef cached_array_method = {
    "cached_array", reinterpret_cast<PyCFunction>(reinterpret_cast<void*>(cached_array_fastcall)), METH_FASTCALL,
    "cached_array(tensor, arrays_attribute) -> array | None"};
}  // namespace

// `cached_array_fastcall` as a builtin function (a new reference).
PyObject* neuron_cached_array_function() {
  return PyCFunction_New(&cached_array_method, nullptr);
}

namespace {
// cached_arrays(values, arrays_attribute) -> [array | None, ...]: `cached_array` of each tensor of the list `values`
// (None for a value that is not a tensor), in one call: a compiled graph's device inputs (dozens per call of a
// backward graph: the activations its forward saved).
PyObject* cached_arrays_fastcall(PyObject*, PyObject* const* args, Py_ssize_t count) {
  if (count != 2 || !PyList_Check(args[0])) {
    PyErr_SetString(PyExc_TypeError, "cached_arrays(values, arrays_attribute) takes a list and an attribute name");
    return nullptr;
  }
  Py_ssize_t length = PyList_GET_SIZE(args[0]);
  PyObject* results = PyList_New(length);
  for (Py_ssize_t index = 0; results != nullptr && index < length; ++index) {
    PyObject* value = PyList_GET_ITEM(args[0], index);
    PyObject* found = THPVariable_Check(value) ? cached_array_of(value, args[1]) : Py_NewRef(Py_None);
    if (found == nullptr) {
      Py_CLEAR(results);
      break;
    }
    PyList_SET_ITEM(results, index, found);
  }
  return results;
}
PyMethodDef cached_arrays_method = {
    "cached_arrays", reinterpret_cast<PyCFunction>(reinterpret_cast<void*>(cached_arrays_fastcall)), METH_FASTCALL,
    "cached_arrays(values, arrays_attribute) -> [array | None, ...]"};
}  // namespace

// `cached_arrays_fastcall` as a builtin function (a new reference).
PyObject* neuron_cached_arrays_function() {
  return PyCFunction_New(&cached_arrays_method, nullptr);
}

namespace {
PyObject* interned(const char* name) {
  PyObject* string = PyUnicode_InternFromString(name);
  if (string == nullptr) {
    PyErr_Clear();
  }
  return string;
}

// An attribute of a pending value (region._Written) as a C integer; false with a Python error on failure.
bool integer_attribute(PyObject* object, PyObject* name, long long* value) {
  PyObject* found = PyObject_GetAttr(object, name);
  if (found == nullptr) {
    return false;
  }
  *value = PyLong_AsLongLong(found);
  Py_DECREF(found);
  return !(*value == -1 && PyErr_Occurred());
}

// The names `sources_of` reads and the strings a source holds, interned once.
struct SourceNames {
  PyObject* start = interned("start");
  PyObject* nbytes = interned("nbytes");
  PyObject* dtype = interned("dtype");
  PyObject* shape = interned("shape");
  PyObject* strides = interned("strides");
  PyObject* source = interned("source");
  PyObject* value = interned("value");
  PyObject* view = interned("view");
  PyObject* pending = interned("pending");
  PyObject* input_keys = interned("input_keys");
  PyObject* inputs = interned("inputs");
  PyObject* input_types = interned("input_types");
  PyObject* input_blocks = interned("input_blocks");
  bool complete() const {
    return start && nbytes && dtype && shape && strides && source && value && view && pending && input_keys &&
           inputs && input_types && input_blocks;
  }
};

const SourceNames& source_names() {
  static const SourceNames names;
  return names;
}

// What `sources_of` found for one operand.
enum class Found { source, slow, cannot_join, error };

// A plain tuple of `sizes` (it hashes and compares as the torch.Size `_source_of` keys with), or null with an error.
PyObject* sizes_tuple(const std::vector<int64_t>& sizes) {
  PyObject* shape = PyTuple_New(static_cast<Py_ssize_t>(sizes.size()));
  for (size_t axis = 0; shape != nullptr && axis < sizes.size(); ++axis) {
    PyObject* extent = PyLong_FromLongLong(sizes[axis]);
    if (extent == nullptr) {
      Py_CLEAR(shape);
      break;
    }
    PyTuple_SET_ITEM(shape, static_cast<Py_ssize_t>(axis), extent);
  }
  return shape;
}

// `source_of` for one pending value `entry` (region._Written) of the operand's block: `*decided` when the entry
// overlaps the operand's bytes (`start`, `nbytes`), and then what the operand's source is.
Found pending_source(PyObject* entry, long long start, long long nbytes, PyObject* dtype,
                     const std::vector<int64_t>& sizes, PyObject** source, bool* decided) {
  const SourceNames& names = source_names();
  *decided = true;
  long long entry_start = 0;
  long long entry_nbytes = 0;
  if (!integer_attribute(entry, names.start, &entry_start) || !integer_attribute(entry, names.nbytes, &entry_nbytes)) {
    return Found::error;
  }
  if (!(entry_start < start + nbytes && start < entry_start + entry_nbytes)) {
    *decided = false;
    return Found::slow;
  }
  PyObject* entry_dtype = PyObject_GetAttr(entry, names.dtype);
  if (entry_dtype == nullptr) {
    return Found::error;
  }
  Py_DECREF(entry_dtype);  // the entry holds it; dtypes are singletons, so identity is equality
  if (entry_dtype != dtype) {
    return Found::cannot_join;
  }
  if (entry_start != start || entry_nbytes != nbytes) {
    return Found::slow;  // part of the value's bytes (`_within`)
  }
  PyObject* strides = PyObject_GetAttr(entry, names.strides);
  if (strides == nullptr) {
    return Found::error;
  }
  Py_DECREF(strides);
  if (strides != Py_None) {
    return Found::slow;  // a value stored transposed (`_viewed`)
  }
  PyObject* shape = PyObject_GetAttr(entry, names.shape);
  if (shape == nullptr) {
    return Found::error;
  }
  bool same = PyTuple_Check(shape) && PyTuple_GET_SIZE(shape) == static_cast<Py_ssize_t>(sizes.size());
  for (size_t axis = 0; same && axis < sizes.size(); ++axis) {
    PyObject* extent = PyTuple_GET_ITEM(shape, static_cast<Py_ssize_t>(axis));
    long long value = PyLong_Check(extent) ? PyLong_AsLongLong(extent) : -1;
    if (value == -1 && PyErr_Occurred()) {
      PyErr_Clear();
    }
    same = value == sizes[axis];
  }
  Py_DECREF(shape);
  if (same) {
    *source = PyObject_GetAttr(entry, names.source);  // the value itself, the common case
    return *source == nullptr ? Found::error : Found::source;
  }
  // the same bytes and dtype, so as many elements: a reshape of the value, ("value", id, ("view", shape))
  PyObject* value = PyObject_GetAttr(entry, names.value);
  PyObject* viewed = value == nullptr ? nullptr : sizes_tuple(sizes);
  if (viewed == nullptr) {
    Py_XDECREF(value);
    return Found::error;
  }
  *source = Py_BuildValue("(ON(ON))", names.value, value, names.view, viewed);
  return *source == nullptr ? Found::error : Found::source;
}

// Adds a region input read from `array` (the array `storage.dense_array` keeps for the operand), as `_source_of`
// does: `held(array)` to the region's inputs, its shape and dtype to their types, the block's id to the blocks read,
// the place's key to the keys. Its index, or -1 with an error.
Py_ssize_t add_input(PyObject* region, PyObject* key, PyObject* block_id, PyObject* shape, PyObject* dtype,
                     PyObject* array, PyObject* held) {
  const SourceNames& names = source_names();
  PyObject* inputs = PyObject_GetAttr(region, names.inputs);
  PyObject* types = PyObject_GetAttr(region, names.input_types);
  PyObject* blocks = PyObject_GetAttr(region, names.input_blocks);
  PyObject* keys = PyObject_GetAttr(region, names.input_keys);
  PyObject* made = nullptr;
  PyObject* type = nullptr;
  PyObject* index = nullptr;
  Py_ssize_t position = -1;
  if (inputs != nullptr && types != nullptr && blocks != nullptr && keys != nullptr && PyList_Check(inputs) &&
      PyList_Check(types) && PySet_Check(blocks) && PyDict_Check(keys)) {
    made = PyObject_CallOneArg(held, array);
    type = made == nullptr ? nullptr : PyTuple_Pack(2, shape, dtype);
    if (type != nullptr && PySet_Add(blocks, block_id) == 0 && PyList_Append(inputs, made) == 0 &&
        PyList_Append(types, type) == 0) {
      position = PyList_GET_SIZE(inputs) - 1;
      index = PyLong_FromSsize_t(position);
      if (index == nullptr || PyDict_SetItem(keys, key, index) != 0) {
        position = -1;
      }
    }
  } else if (!PyErr_Occurred()) {
    PyErr_SetString(PyExc_TypeError, "sources_of: the region's inputs are not a list, list, set and dict");
  }
  Py_XDECREF(index);
  Py_XDECREF(type);
  Py_XDECREF(made);
  Py_XDECREF(keys);
  Py_XDECREF(blocks);
  Py_XDECREF(types);
  Py_XDECREF(inputs);
  return position;
}

// `region._source_of(tensor)` for the common cases: a contiguous device tensor that is neither a conjugate nor a
// negative view over a block of its own, and either over exactly one pending value of its block (the value, or a
// reshape of it), or over bytes the region reads from device memory already (their input), or, when `may_add`,
// over bytes whose array `storage.dense_array` keeps (a new input, as `_source_of` adds it). `cannot_join` where
// `_source_of` answers None for the same reason (pending bytes read as another dtype); `slow` for every other case,
// which `_source_of` answers (CPU scalars, slices, expands and transposes of pending values, strided operands, bytes
// without a kept array). `*source` receives a new reference.
Found source_of(PyObject* operand, PyObject* region, PyObject* pending, PyObject* input_keys,
                PyObject* input_sources, PyObject* block_attribute, PyObject* arrays_attribute, PyObject* held_maker,
                bool may_add, PyObject** source) {
  if (!THPVariable_Check(operand)) {
    return Found::slow;
  }
  const at::Tensor& tensor = THPVariable_Unpack(operand);
  PyObject* stored = nullptr;
  int64_t offset = 0;
  int64_t itemsize = 0;
  int64_t numel = 0;
  std::vector<int64_t> sizes;
  try {
    if (!tensor.defined() || !tensor.has_storage() || tensor.is_cpu() || !tensor.is_contiguous() ||
        tensor.is_conj() || tensor.is_neg()) {
      return Found::slow;
    }
    offset = tensor.storage_offset();
    itemsize = static_cast<int64_t>(tensor.element_size());
    numel = tensor.numel();
    sizes = tensor.sizes().vec();
    stored = THPStorage_Wrap(tensor.storage());
  } catch (const std::exception&) {
    Py_XDECREF(stored);
    return Found::slow;
  }
  if (stored == nullptr) {
    PyErr_Clear();
    return Found::slow;
  }
  PyObject* block = PyObject_GetAttr(stored, block_attribute);
  if (block == nullptr || block == Py_None) {
    PyErr_Clear();
    Py_XDECREF(block);
    Py_DECREF(stored);
    return Found::slow;  // a storage without a block of its own: `storage.block_of` finds it
  }
  PyObject* dtype = reinterpret_cast<PyObject*>(torch::getTHPDtype(tensor.scalar_type()));  // borrowed
  // the block stays alive while the storage holds it: from here on only its address is needed
  Py_DECREF(block);
  PyObject* block_id = PyLong_FromVoidPtr(block);
  if (block_id == nullptr) {
    Py_DECREF(stored);
    return Found::error;
  }
  PyObject* held = PyDict_GetItemWithError(pending, block_id);  // borrowed
  if (held == nullptr && PyErr_Occurred()) {
    Py_DECREF(block_id);
    Py_DECREF(stored);
    return Found::error;
  }
  if (held != nullptr && PyTuple_Check(held) && PyTuple_GET_SIZE(held) == 2 &&
      PyWeakref_Check(PyTuple_GET_ITEM(held, 0)) && PyWeakref_GetObject(PyTuple_GET_ITEM(held, 0)) == block) {
    PyObject* entries = PyTuple_GET_ITEM(held, 1);
    Found found = Found::slow;
    bool decided = !PyList_Check(entries);
    long long start = offset * itemsize;
    long long nbytes = numel * itemsize;
    for (Py_ssize_t index = 0; !decided && index < PyList_GET_SIZE(entries); ++index) {
      found = pending_source(PyList_GET_ITEM(entries, index), start, nbytes, dtype, sizes, source, &decided);
    }
    if (decided) {
      Py_DECREF(block_id);
      Py_DECREF(stored);
      return found;
    }
    // the block's pending values lie elsewhere: these bytes are read from device memory, as below
  }
  // an operand read from device memory: one input per place, keyed as `_source_of` keys it
  PyObject* shape = sizes_tuple(sizes);
  if (shape == nullptr) {
    Py_DECREF(block_id);
    Py_DECREF(stored);
    return Found::error;
  }
  PyObject* start = PyLong_FromLongLong(offset);
  PyObject* key = start == nullptr ? nullptr : PyTuple_Pack(4, block_id, start, shape, dtype);
  PyObject* index = key == nullptr ? nullptr : PyDict_GetItemWithError(input_keys, key);  // borrowed
  Found found = Found::slow;
  Py_ssize_t position = -1;
  if (index != nullptr) {
    position = PyLong_AsSsize_t(index);
    found = position == -1 && PyErr_Occurred() ? Found::error : Found::source;
  } else if (key == nullptr || PyErr_Occurred()) {
    found = Found::error;
  } else if (may_add) {
    // the array `storage.dense_array` keeps on the storage, by (offset, shape, dtype)
    PyObject* arrays = PyObject_GetAttr(stored, arrays_attribute);
    if (arrays == nullptr) {
      PyErr_Clear();
    } else if (PyDict_Check(arrays)) {
      PyObject* array_key = PyTuple_Pack(3, start, shape, dtype);
      PyObject* array = array_key == nullptr ? nullptr : PyDict_GetItemWithError(arrays, array_key);  // borrowed
      Py_XDECREF(array_key);
      if (array != nullptr) {
        Py_INCREF(array);
        position = add_input(region, key, block_id, shape, dtype, array, held_maker);
        Py_DECREF(array);
        found = position == -1 ? Found::error : Found::source;
      } else if (PyErr_Occurred()) {
        found = Found::error;
      }
    }
    Py_XDECREF(arrays);
  }
  Py_XDECREF(key);
  Py_XDECREF(start);
  Py_DECREF(shape);
  Py_DECREF(block_id);
  Py_DECREF(stored);
  if (found != Found::source) {
    return found;
  }
  if (PyList_Check(input_sources) && position >= 0 && position < PyList_GET_SIZE(input_sources)) {
    *source = Py_NewRef(PyList_GET_ITEM(input_sources, position));
    return Found::source;
  }
  *source = Py_BuildValue("(sn)", "input", position);
  return *source == nullptr ? Found::error : Found::source;
}

// sources_of(operands, region, input_sources, block_attribute, arrays_attribute, held, slow)
//     -> [source | slow, ...] | None:
// per operand of a recorded op, its source in deferred region `region` (region._Region) where `source_of` finds it,
// `slow` where `region._source_of` is to answer; None when an operand cannot join the region (`_source_of` answers
// None). New inputs are added only up to the first operand left to `_source_of`, so that the region's inputs come
// in the operands' order as `_source_of` adds them one by one.
PyObject* sources_of_fastcall(PyObject*, PyObject* const* args, Py_ssize_t count) {
  if (count != 7 || !PyList_Check(args[0]) || !source_names().complete()) {
    PyErr_SetString(PyExc_TypeError,
                    "sources_of(operands, region, input_sources, block_attribute, arrays_attribute, held, slow) "
                    "takes a list of operands");
    return nullptr;
  }
  const SourceNames& names = source_names();
  PyObject* pending = PyObject_GetAttr(args[1], names.pending);
  PyObject* input_keys = PyObject_GetAttr(args[1], names.input_keys);
  if (pending == nullptr || input_keys == nullptr || !PyDict_Check(pending) || !PyDict_Check(input_keys)) {
    Py_XDECREF(pending);
    Py_XDECREF(input_keys);
    if (!PyErr_Occurred()) {
      PyErr_SetString(PyExc_TypeError, "sources_of: the region's pending values and input keys are not dicts");
    }
    return nullptr;
  }
  Py_ssize_t length = PyList_GET_SIZE(args[0]);
  PyObject* results = PyList_New(length);
  bool may_add = true;
  for (Py_ssize_t index = 0; results != nullptr && index < length; ++index) {
    PyObject* source = nullptr;
    // `input_keys` may grow on the way (`add_input`), but it stays the region's one dict
    switch (source_of(PyList_GET_ITEM(args[0], index), args[1], pending, input_keys, args[2], args[3], args[4],
                      args[5], may_add, &source)) {
      case Found::source:
        PyList_SET_ITEM(results, index, source);
        break;
      case Found::slow:
        may_add = false;
        PyList_SET_ITEM(results, index, Py_NewRef(args[6]));
        break;
      case Found::cannot_join:
        Py_SETREF(results, Py_NewRef(Py_None));
        index = length;
        break;
      case Found::error:
        Py_CLEAR(results);
        break;
    }
  }
  Py_DECREF(input_keys);
  Py_DECREF(pending);
  return results;
}
PyMethodDef sources_of_method = {
    "sources_of", reinterpret_cast<PyCFunction>(reinterpret_cast<void*>(sources_of_fastcall)), METH_FASTCALL,
    "sources_of(operands, region, input_sources, block_attribute, arrays_attribute, held, slow) -> "
    "[source | slow, ...] | None"};
}  // namespace

// `sources_of_fastcall` as a builtin function (a new reference).
PyObject* neuron_sources_of_function() {
  return PyCFunction_New(&sources_of_method, nullptr);
}

namespace {
// The length of `value` when it is a list or a tuple (subclasses too: a torch.Size), else -1, as eager._signature's
// structure of the arguments counts it.
long long sequence_length(PyObject* value) {
  if (PyList_Check(value)) {
    return PyList_GET_SIZE(value);
  }
  return PyTuple_Check(value) ? PyTuple_GET_SIZE(value) : -1;
}

// The part of a program key `eager._signature` gives one flattened argument `value`, in `*part` (a new reference):
// false when the Python function is to answer the whole call (a tensor of another layout or of symbolic sizes, a
// symbolic number, a tensor subclass whose facts are Python's), true with `*part` null and an exception set on an
// error. `*host` and `*device` record a CPU tensor of one dimension or more and a device tensor.
bool signature_part(PyObject* value, PyObject* symbolic, PyObject* hex_name, PyObject** part, bool* host,
                    bool* device) {
  *part = nullptr;
  if (THPVariable_Check(value)) {
    // a subclass may answer `shape` and `dtype` in Python: only torch.Tensor and Parameter are read here
    if (!THPVariable_CheckExact(value)) {
      return false;
    }
    const at::Tensor& tensor = THPVariable_Unpack(value);
    PyObject* shape = nullptr;
    bool where = false;
    try {
      if (!tensor.defined() || tensor.layout() != c10::kStrided ||
          tensor.unsafeGetTensorImpl()->has_symbolic_sizes_strides()) {
        return false;
      }
      where = tensor.device().type() == c10::DeviceType::PrivateUse1;
      if (!where && tensor.is_cpu() && tensor.dim() > 0) {
        *host = true;
      }
      shape = sizes_tuple(tensor.sizes().vec());  // equal to the torch.Size, and hashed as it is
    } catch (const std::exception&) {
      return false;
    }
    if (shape == nullptr) {
      return true;
    }
    *device = *device || where;
    PyObject* dtype = reinterpret_cast<PyObject*>(torch::getTHPDtype(tensor.scalar_type()));  // borrowed
    *part = PyTuple_Pack(3, shape, dtype, where ? Py_True : Py_False);
    Py_DECREF(shape);
    return true;
  }
  if (PyLong_CheckExact(value) || PyBool_Check(value) || value == Py_None) {
    *part = PyTuple_Pack(2, reinterpret_cast<PyObject*>(Py_TYPE(value)), value);
    return true;
  }
  int is_symbolic = PyObject_IsInstance(value, symbolic);
  if (is_symbolic != 0) {
    return is_symbolic < 0;  // an error, or a symbolic number: the Python function's
  }
  if (PyFloat_CheckExact(value)) {
    // by its bits (float.hex), as the Python function keys it: -0.0 and 0.0, and NaNs, apart
    PyObject* bits = PyObject_CallMethodNoArgs(value, hex_name);
    if (bits != nullptr) {
      *part = PyTuple_Pack(2, reinterpret_cast<PyObject*>(&PyFloat_Type), bits);
      Py_DECREF(bits);
    }
    return true;
  }
  *part = PyTuple_Pack(2, reinterpret_cast<PyObject*>(Py_TYPE(value)), value);
  return true;
}

// signature(facts, args, kwargs, flat, symbolic, python) -> key | python: `eager._signature`'s program key of an
// op's call (`facts`, its arguments `args` and `kwargs`, flattened in `flat`), equal to the one the Python function
// makes (a tuple of the sizes where it holds a torch.Size), or `python` where that function is to answer: a call
// it answers None for or raises about (another layout, symbolic values, a CPU tensor next to a device tensor), or
// one with a tensor subclass or other argument containers. `symbolic` is the tuple of torch's symbolic number types.
PyObject* signature_fastcall(PyObject*, PyObject* const* args, Py_ssize_t count) {
  if (count != 6) {
    PyErr_SetString(PyExc_TypeError, "signature(facts, args, kwargs, flat, symbolic, python) takes six arguments");
    return nullptr;
  }
  PyObject* call_args = args[1];
  PyObject* kwargs = args[2];
  PyObject* flat = args[3];
  PyObject* python = args[5];
  if (!PyTuple_CheckExact(call_args) || !PyDict_CheckExact(kwargs) || !PyList_CheckExact(flat)) {
    return Py_NewRef(python);
  }
  static PyObject* hex_name = interned("hex");
  if (hex_name == nullptr) {
    return nullptr;
  }
  Py_ssize_t positional = PyTuple_GET_SIZE(call_args);
  Py_ssize_t keywords = PyDict_GET_SIZE(kwargs);
  Py_ssize_t values = PyList_GET_SIZE(flat);
  PyObject* names = PyTuple_New(keywords);
  PyObject* structure = PyTuple_New(positional + keywords);
  PyObject* key = PyTuple_New(4 + values);
  PyObject* length = PyLong_FromSsize_t(positional);
  bool failed = names == nullptr || structure == nullptr || key == nullptr || length == nullptr;
  for (Py_ssize_t index = 0; !failed && index < positional; ++index) {
    PyObject* extent = PyLong_FromLongLong(sequence_length(PyTuple_GET_ITEM(call_args, index)));
    failed = extent == nullptr;
    if (!failed) {
      PyTuple_SET_ITEM(structure, index, extent);
    }
  }
  Py_ssize_t position = 0;
  PyObject* name = nullptr;
  PyObject* value = nullptr;
  for (Py_ssize_t index = 0; !failed && PyDict_Next(kwargs, &position, &name, &value); ++index) {
    PyObject* extent = PyLong_FromLongLong(sequence_length(value));
    failed = extent == nullptr;
    if (!failed) {
      PyTuple_SET_ITEM(names, index, Py_NewRef(name));
      PyTuple_SET_ITEM(structure, positional + index, extent);
    }
  }
  if (failed) {
    Py_XDECREF(names);
    Py_XDECREF(structure);
    Py_XDECREF(key);
    Py_XDECREF(length);
    return nullptr;
  }
  PyTuple_SET_ITEM(key, 0, Py_NewRef(args[0]));
  PyTuple_SET_ITEM(key, 1, length);
  PyTuple_SET_ITEM(key, 2, names);
  PyTuple_SET_ITEM(key, 3, structure);
  bool host = false;
  bool device = false;
  for (Py_ssize_t index = 0; index < values; ++index) {
    PyObject* part = nullptr;
    if (!signature_part(PyList_GET_ITEM(flat, index), args[4], hex_name, &part, &host, &device)) {
      Py_DECREF(key);
      return Py_NewRef(python);
    }
    if (part == nullptr) {
      Py_DECREF(key);
      return nullptr;
    }
    PyTuple_SET_ITEM(key, 4 + index, part);
  }
  if (host && device) {
    Py_DECREF(key);
    return Py_NewRef(python);  // the Python function raises PyTorch's error about the devices
  }
  return key;
}
PyMethodDef signature_method = {
    "signature", reinterpret_cast<PyCFunction>(reinterpret_cast<void*>(signature_fastcall)), METH_FASTCALL,
    "signature(facts, args, kwargs, flat, symbolic, python) -> key | python"};
}  // namespace

// `signature_fastcall` as a builtin function (a new reference).
PyObject* neuron_signature_function() {
  return PyCFunction_New(&signature_method, nullptr);
}

namespace {
// What `user_line` has learnt, as sources.py's dictionaries hold it: per code object (held: entries are never
// dropped, so no other code object can take its address), whether it is torch's or the frontend's; per (code,
// instruction offset) of a user's frame, its `file:line`; per autograd node name, the name with the suffix.
std::unordered_map<PyObject*, bool>& skipped_codes() {
  static auto* codes = new std::unordered_map<PyObject*, bool>();
  return *codes;
}
std::map<std::pair<PyObject*, int>, PyObject*>& user_lines() {
  static auto* lines = new std::map<std::pair<PyObject*, int>, PyObject*>();
  return *lines;
}
std::unordered_map<std::string, PyObject*>& node_lines() {
  static auto* names = new std::unordered_map<std::string, PyObject*>();
  return *names;
}

// Whether code object `code` is torch's or the frontend's: its file starts with one of `skipped` (a tuple of str)
// or is a frozen module's; -1 with an exception set.
int not_the_users(PyObject* code, PyObject* skipped) {
  auto& codes = skipped_codes();
  auto found = codes.find(code);
  if (found != codes.end()) {
    return found->second ? 1 : 0;
  }
  PyObject* filename = reinterpret_cast<PyCodeObject*>(code)->co_filename;
  bool skip = false;
  for (Py_ssize_t index = 0; !skip && index < PyTuple_GET_SIZE(skipped); ++index) {
    Py_ssize_t match = PyUnicode_Tailmatch(filename, PyTuple_GET_ITEM(skipped, index), 0, PY_SSIZE_T_MAX, -1);
    if (match < 0) {
      return -1;
    }
    skip = match == 1;
  }
  if (!skip) {
    static PyObject* frozen = interned("<frozen");
    Py_ssize_t match = frozen == nullptr ? -1 : PyUnicode_Tailmatch(filename, frozen, 0, PY_SSIZE_T_MAX, -1);
    if (match < 0) {
      return -1;
    }
    skip = match == 1;
  }
  Py_INCREF(code);
  codes.emplace(code, skip);
  return skip ? 1 : 0;
}

// user_line(issuer, engine_code, skipped, suffix) -> str: sources.user_line in one call. The walk starts at
// `issuer.frame` (the frame a device kernel marked) or else at the calling Python frame, and goes out through
// torch's and the frontend's frames (files under `skipped`) to the first other frame, `file:line`; it stops at
// `engine_code` (the frame that hands a backward pass to the autograd engine), and then, as when no frame is left,
// names the autograd node being run (its name and `suffix`), else ''.
PyObject* user_line_fastcall(PyObject*, PyObject* const* args, Py_ssize_t count) {
  if (count != 4 || !PyTuple_Check(args[2]) || !PyUnicode_Check(args[3])) {
    PyErr_SetString(PyExc_TypeError, "user_line(issuer, engine_code, skipped, suffix) takes a tuple of prefixes");
    return nullptr;
  }
  static PyObject* frame_name = interned("frame");
  if (frame_name == nullptr) {
    return nullptr;
  }
  PyObject* marked = PyObject_GetAttr(args[0], frame_name);
  if (marked == nullptr) {
    return nullptr;
  }
  PyFrameObject* frame = nullptr;
  if (PyFrame_Check(marked)) {
    frame = reinterpret_cast<PyFrameObject*>(marked);
  } else {
    Py_DECREF(marked);
    frame = PyEval_GetFrame();  // borrowed: the caller's frame
    Py_XINCREF(frame);
  }
  PyObject* line = nullptr;
  while (frame != nullptr) {
    PyCodeObject* code = PyFrame_GetCode(frame);  // a new reference
    PyObject* code_object = reinterpret_cast<PyObject*>(code);
    if (code_object == args[1]) {
      Py_DECREF(code);
      break;
    }
    int skipped = not_the_users(code_object, args[2]);
    if (skipped < 0) {
      Py_DECREF(code);
      Py_DECREF(frame);
      return nullptr;
    }
    if (skipped == 0) {
      // the same instructions issue the same ops step after step: each one's line worked out once
      std::pair<PyObject*, int> where(code_object, PyFrame_GetLasti(frame));
      auto& lines = user_lines();
      auto found = lines.find(where);
      if (found == lines.end()) {
        PyObject* made = PyUnicode_FromFormat("%U:%d", code->co_filename, PyFrame_GetLineNumber(frame));
        if (made == nullptr) {
          Py_DECREF(code);
          Py_DECREF(frame);
          return nullptr;
        }
        Py_INCREF(code_object);  // the entry holds its code (`not_the_users` does too)
        found = lines.emplace(where, made).first;
      }
      line = Py_NewRef(found->second);
      Py_DECREF(code);
      Py_DECREF(frame);
      return line;
    }
    Py_DECREF(code);
    PyFrameObject* back = PyFrame_GetBack(frame);  // a new reference, or null
    Py_DECREF(frame);
    frame = back;
  }
  Py_XDECREF(frame);
  std::string name;
  try {
    auto node = torch::autograd::get_current_node();
    if (!node) {
      return PyUnicode_FromString("");
    }
    name = node->name();
  } catch (const std::exception& error) {
    PyErr_SetString(PyExc_RuntimeError, error.what());
    return nullptr;
  }
  auto& names = node_lines();
  auto found = names.find(name);
  if (found == names.end()) {
    PyObject* bare = PyUnicode_FromStringAndSize(name.data(), static_cast<Py_ssize_t>(name.size()));
    PyObject* made = bare == nullptr ? nullptr : PyUnicode_Concat(bare, args[3]);
    Py_XDECREF(bare);
    if (made == nullptr) {
      return nullptr;
    }
    found = names.emplace(name, made).first;
  }
  return Py_NewRef(found->second);
}
PyMethodDef user_line_method = {
    "user_line", reinterpret_cast<PyCFunction>(reinterpret_cast<void*>(user_line_fastcall)), METH_FASTCALL,
    "user_line(issuer, engine_code, skipped, suffix) -> str"};
}  // namespace

// `user_line_fastcall` as a builtin function (a new reference).
PyObject* neuron_user_line_function() {
  return PyCFunction_New(&user_line_method, nullptr);
}

namespace {
PyObject* one() {
  static PyObject* constant = PyLong_FromLong(1);
  return constant;
}

// One fresh result of a recorded op as `region.record` registers it: `entry`, its pending value (a new
// region._Written), pending under its block's id, stored as value `value`, in the op's values and targets. False with
// `*done` unset when the tensor's storage carries no block (the Python loop finds it); false with an exception set on
// an error.
bool register_fresh(PyObject* pair, PyObject* const* args, PyObject* value, bool* done) {
  *done = false;
  PyObject* pending = args[2];
  PyObject* stored = args[3];
  PyObject* target_blocks = args[4];
  PyObject* values = args[5];
  PyObject* targets = args[6];
  PyObject* written_type = args[8];
  PyObject* value_sources = args[9];
  if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2 || !THPVariable_Check(PyTuple_GET_ITEM(pair, 0))) {
    return true;  // the Python loop says what is wrong
  }
  PyObject* target = PyTuple_GET_ITEM(pair, 1);
  if (!PyArray_Check(target)) {
    return true;
  }
  const at::Tensor& tensor = THPVariable_Unpack(PyTuple_GET_ITEM(pair, 0));
  PyObject* wrapped = nullptr;
  try {
    if (!tensor.defined() || !tensor.has_storage()) {
      return true;
    }
    wrapped = THPStorage_Wrap(tensor.storage());
  } catch (const std::exception&) {
    return true;
  }
  if (wrapped == nullptr) {
    PyErr_Clear();
    return true;
  }
  PyObject* block = PyObject_GetAttr(wrapped, args[10]);
  Py_DECREF(wrapped);
  if (block == nullptr || block == Py_None) {
    PyErr_Clear();
    Py_XDECREF(block);
    return true;  // a storage torch allocated itself: `storage.block_of` finds its block
  }
  static PyObject* value_name = interned("value");
  PyObject* dtype = reinterpret_cast<PyObject*>(torch::getTHPDtype(tensor.scalar_type()));  // borrowed
  PyArrayObject* array = reinterpret_cast<PyArrayObject*>(target);
  PyObject* shape = PyTuple_New(PyArray_NDIM(array));
  for (int axis = 0; shape != nullptr && axis < PyArray_NDIM(array); ++axis) {
    PyObject* extent = PyLong_FromSsize_t(PyArray_DIM(array, axis));
    if (extent == nullptr) {
      Py_CLEAR(shape);
      break;
    }
    PyTuple_SET_ITEM(shape, axis, extent);
  }
  PyObject* nbytes = PyLong_FromSsize_t(PyArray_NBYTES(array));
  Py_ssize_t index = PyLong_AsSsize_t(value);
  PyObject* source = nullptr;
  if (index >= 0 && PyList_Check(value_sources) && index < PyList_GET_SIZE(value_sources)) {
    source = Py_NewRef(PyList_GET_ITEM(value_sources, index));
  } else if (!PyErr_Occurred() && value_name != nullptr) {
    source = PyTuple_Pack(3, value_name, value, Py_None);
  }
  PyObject* entry = nullptr;
  if (shape != nullptr && nbytes != nullptr && source != nullptr) {
    PyObject* zero = PyLong_FromLong(0);
    if (zero != nullptr) {
      PyObject* fields[] = {value, zero, nbytes, dtype, shape, Py_None, source};
      entry = PyObject_Vectorcall(written_type, fields, 7, nullptr);
      Py_DECREF(zero);
    }
  }
  Py_XDECREF(source);
  Py_XDECREF(nbytes);
  Py_XDECREF(shape);
  PyObject* reference = entry == nullptr ? nullptr : PyWeakref_NewRef(block, nullptr);
  PyObject* block_id = reference == nullptr ? nullptr : PyLong_FromVoidPtr(block);
  Py_DECREF(block);
  PyObject* entries = block_id == nullptr ? nullptr : PyList_New(1);
  PyObject* held = nullptr;
  PyObject* kept = nullptr;
  bool ok = false;
  if (entries != nullptr) {
    PyList_SET_ITEM(entries, 0, Py_NewRef(entry));
    held = PyTuple_Pack(2, reference, entries);
    kept = held == nullptr ? nullptr : PyTuple_Pack(2, reference, entry);
    ok = kept != nullptr && PyDict_SetItem(pending, block_id, held) == 0 && PyDict_SetItem(stored, value, kept) == 0 &&
         PyDict_SetItem(target_blocks, value, block_id) == 0 && PyList_Append(values, value) == 0 &&
         PyList_Append(targets, target) == 0;
  }
  Py_XDECREF(kept);
  Py_XDECREF(held);
  Py_XDECREF(entries);
  Py_XDECREF(block_id);
  Py_XDECREF(reference);
  Py_XDECREF(entry);
  *done = ok;
  return false;
}

// record_fresh(outputs, first, pending, stored, target_blocks, values, targets, value, written_type, value_sources,
//              block_attribute) -> (value, next):
// `region.record`'s loop over a recorded op's fresh results, outputs[first:] ((tensor, array) pairs over new blocks),
// in one call: each one's pending value (`written_type`, region._Written, of value id `value` on, its source from
// `value_sources` where the list has it) under its block's id in `pending`, in `stored` and `target_blocks` by value
// id, and its value id and array appended to `values` and `targets`. Returns the next value id and the position of
// the first output it left to the Python loop (len(outputs) when none).
PyObject* record_fresh_fastcall(PyObject*, PyObject* const* args, Py_ssize_t count) {
  if (count != 11 || !PyList_Check(args[0]) || !PyDict_Check(args[2]) || !PyDict_Check(args[3]) ||
      !PyDict_Check(args[4]) || !PyList_Check(args[5]) || !PyList_Check(args[6]) || !PyLong_Check(args[7])) {
    PyErr_SetString(PyExc_TypeError,
                    "record_fresh(outputs, first, pending, stored, target_blocks, values, targets, value, "
                    "written_type, value_sources, block_attribute) takes lists, dicts and ints");
    return nullptr;
  }
  if (!neuron::numpy_api_ready()) {
    return nullptr;
  }
  Py_ssize_t first = PyLong_AsSsize_t(args[1]);
  if (first == -1 && PyErr_Occurred()) {
    return nullptr;
  }
  PyObject* value = Py_NewRef(args[7]);
  Py_ssize_t length = PyList_GET_SIZE(args[0]);
  Py_ssize_t index = first;
  for (; index < length; ++index) {
    bool done = false;
    if (register_fresh(PyList_GET_ITEM(args[0], index), args, value, &done) || !done) {
      if (PyErr_Occurred()) {
        Py_DECREF(value);
        return nullptr;
      }
      break;  // left to the Python loop
    }
    PyObject* next = PyNumber_Add(value, one());
    Py_DECREF(value);
    value = next;
    if (value == nullptr) {
      return nullptr;
    }
  }
  return Py_BuildValue("(Nn)", value, index);
}
PyMethodDef record_fresh_method = {
    "record_fresh", reinterpret_cast<PyCFunction>(reinterpret_cast<void*>(record_fresh_fastcall)), METH_FASTCALL,
    "record_fresh(outputs, first, pending, stored, target_blocks, values, targets, value, written_type, "
    "value_sources, block_attribute) -> (value, next)"};
}  // namespace

// `record_fresh_fastcall` as a builtin function (a new reference).
PyObject* neuron_record_fresh_function() {
  return PyCFunction_New(&record_fresh_method, nullptr);
}

namespace {
// A position of `flat` from list `positions`, or -1 (with an exception set when it is no int in range).
Py_ssize_t position_in(PyObject* positions, Py_ssize_t index, Py_ssize_t length) {
  Py_ssize_t position = PyLong_AsSsize_t(PyList_GET_ITEM(positions, index));
  if (position == -1 && PyErr_Occurred()) {
    return -1;
  }
  if (position < 0 || position >= length) {
    PyErr_SetString(PyExc_IndexError, "overlap_alone: a position outside the flattened arguments");
    return -1;
  }
  return position;
}

// overlap_alone(flat, tensor_positions, written_positions) -> [True, ...] | None: `eager._check_overlap` for the
// calls where it has nothing to check: every written tensor contiguous (no internal overlap) and the only operand
// over its storage (told, as there, by the CPU-or-not flag and the storage's address), so that no operand can overlap
// it and each is alone. None for any other call (a written tensor's storage read by another operand, a strided
// written tensor, an operand that is no tensor with a storage): the Python function checks those.
PyObject* overlap_alone_fastcall(PyObject*, PyObject* const* args, Py_ssize_t count) {
  if (count != 3 || !PyList_Check(args[0]) || !PyList_Check(args[1]) || !PyList_Check(args[2])) {
    PyErr_SetString(PyExc_TypeError, "overlap_alone(flat, tensor_positions, written_positions) takes three lists");
    return nullptr;
  }
  Py_ssize_t length = PyList_GET_SIZE(args[0]);
  std::map<std::pair<bool, const void*>, int> operands;
  std::vector<std::pair<bool, const void*>> written;
  try {
    for (int list = 1; list <= 2; ++list) {
      for (Py_ssize_t index = 0; index < PyList_GET_SIZE(args[list]); ++index) {
        Py_ssize_t position = position_in(args[list], index, length);
        if (position < 0) {
          return nullptr;
        }
        PyObject* operand = PyList_GET_ITEM(args[0], position);
        if (!THPVariable_Check(operand)) {
          Py_RETURN_NONE;
        }
        const at::Tensor& tensor = THPVariable_Unpack(operand);
        if (!tensor.defined() || !tensor.has_storage()) {
          Py_RETURN_NONE;
        }
        std::pair<bool, const void*> key(tensor.is_cpu(), tensor.storage().data());
        if (list == 1) {
          ++operands[key];
        } else {
          if (!tensor.is_contiguous()) {
            Py_RETURN_NONE;
          }
          written.push_back(key);
        }
      }
    }
  } catch (const std::exception&) {
    Py_RETURN_NONE;
  }
  for (const auto& key : written) {
    auto found = operands.find(key);
    if (found == operands.end() || found->second != 1) {
      Py_RETURN_NONE;
    }
  }
  PyObject* alone = PyList_New(static_cast<Py_ssize_t>(written.size()));
  for (Py_ssize_t index = 0; alone != nullptr && index < static_cast<Py_ssize_t>(written.size()); ++index) {
    PyList_SET_ITEM(alone, index, Py_NewRef(Py_True));
  }
  return alone;
}
PyMethodDef overlap_alone_method = {
    "overlap_alone", reinterpret_cast<PyCFunction>(reinterpret_cast<void*>(overlap_alone_fastcall)), METH_FASTCALL,
    "overlap_alone(flat, tensor_positions, written_positions) -> [True, ...] | None"};
}  // namespace

// `overlap_alone_fastcall` as a builtin function (a new reference).
PyObject* neuron_overlap_alone_function() {
  return PyCFunction_New(&overlap_alone_method, nullptr);
}

}  // extern "C"

// ---- the device's kernels of `empty`, `empty_strided` and the constant `fill_` ----
// torch makes the gradient `loss.backward()` starts from with `ones_like`: an `empty` and a `fill_.Scalar`. Through
// the Python fallback each was a boxed call into the interpreter, its arguments converted to Python objects and the
// fallback's route, signature and program lookups run; right after a compiled graph, with the caches cold, that cost
// several times the CPU's `ones_like`. These kernels make a contiguous fresh tensor in C++ (the same block, storage and
// tensor as `fresh_tensor`), and write a fill whose program is a constant one (`eager._Program.memo`: the outputs of
// its first run) from the kept output, with one Python call for what the replay accounts (the stream's simulated
// clock, the op's line, the run counters) and decides (no deferred region pending, the device's eager mode). Any
// other call takes the Python path it took before (strided layouts, other memory formats, a fill not yet kept, a
// non-contiguous, conjugate or negative view), so the semantics are those of `dispatch` and `eager`.
namespace neuron {
namespace {

PyObject* fill_python_callback = nullptr;  // (tensor, value) -> None | (replay, memo): the Python path of the fill
PyObject* empty_python_callback = nullptr;  // (size, stride | None, dtype, memory_format | None) -> tensor
PyObject* block_attribute = nullptr;  // the storage attribute holding its block (storage._BLOCK_ATTRIBUTE)
PyObject* arrays_attribute = nullptr;  // the storage attribute holding its kept arrays (storage._DENSE_ARRAYS_ATTRIBUTE)
PyObject* storage_namespace = nullptr;  // storage.py's globals: `_memory` is the device memory, once it is made
PyObject* memory_name = nullptr;  // "_memory"
PyObject* space_name = nullptr;  // "space"

// The native address space of the device memory in use (a borrowed reference), or nullptr when it is not made yet or
// its space is a Python one (the Python kernel makes the tensor then).
PyObject* device_space() {
  PyObject* memory = PyDict_GetItemWithError(storage_namespace, memory_name);  // borrowed
  if (memory == nullptr || memory == Py_None) {
    PyErr_Clear();
    return nullptr;
  }
  PyObject* space = PyObject_GetAttr(memory, space_name);
  if (space == nullptr) {
    PyErr_Clear();
    return nullptr;
  }
  Py_DECREF(space);  // the memory keeps it
  return Py_TYPE(space) == space_type ? space : nullptr;
}

// A fill's program is one per (dtype, sizes, value): the value told by its kind and bits, as the Python signature
// tells a float by its bits (`fill_(-0.0)` is not `fill_(0.0)`).
struct FillKey {
  c10::ScalarType dtype;
  int kind;  // 0 bool, 1 int, 3 float, 4 complex
  uint64_t bits[2];
  std::vector<int64_t> sizes;
  bool operator<(const FillKey& other) const {
    return std::tie(dtype, kind, bits[0], bits[1], sizes) <
        std::tie(other.dtype, other.kind, other.bits[0], other.bits[1], other.sizes);
  }
};

struct FillReplay {
  PyObject* replay;  // () -> bool: the replay accounted (False: it may not replay now); a strong reference
  PyObject* memo;  // the program's kept output: a C-contiguous NumPy array of the tensor's bytes; a strong reference
};

std::map<FillKey, FillReplay> fill_replays;

bool fill_key(const at::Tensor& self, const c10::Scalar& value, FillKey& key) {
  if (value.isSymbolic()) {
    return false;
  }
  key.dtype = self.scalar_type();
  key.bits[0] = key.bits[1] = 0;
  switch (value.type()) {
    case c10::ScalarType::Bool:
      key.kind = 0;
      key.bits[0] = value.toBool();
      break;
    case c10::ScalarType::Long: {
      key.kind = 1;
      int64_t number = value.toLong();
      std::memcpy(&key.bits[0], &number, sizeof(number));
      break;
    }
    case c10::ScalarType::Double: {
      key.kind = 3;
      double number = value.toDouble();
      std::memcpy(&key.bits[0], &number, sizeof(number));
      break;
    }
    case c10::ScalarType::ComplexDouble: {
      key.kind = 4;
      auto number = value.toComplexDouble();
      double parts[2] = {number.real(), number.imag()};
      std::memcpy(key.bits, parts, sizeof(parts));
      break;
    }
    default:
      return false;  // an unsigned value beyond int64: the Python path
  }
  key.sizes = self.sizes().vec();
  return true;
}

// The value as the Python fallback receives it (bool, int, float or complex).
PyObject* scalar_object(const c10::Scalar& value) {
  if (value.isBoolean()) {
    return PyBool_FromLong(value.toBool());
  }
  if (value.isIntegral(/*includeBool=*/false)) {
    return value.type() == c10::ScalarType::UInt64 ? PyLong_FromUnsignedLongLong(value.toUInt64())
                                                    : PyLong_FromLongLong(value.toLong());
  }
  if (value.isComplex()) {
    auto number = value.toComplexDouble();
    return PyComplex_FromDoubles(number.real(), number.imag());
  }
  return PyFloat_FromDouble(value.toDouble());
}

at::Tensor& fill_scalar(at::Tensor& self, const c10::Scalar& value) {
  PyGILState_STATE state = PyGILState_Ensure();
  FillKey key;
  // a dense tensor whose bytes are its values: the kept output's bytes are the tensor's, in order
  bool replayable = self.is_contiguous() && !self.is_conj() && !self.is_neg() && fill_key(self, value, key);
  if (replayable) {
    auto found = fill_replays.find(key);
    if (found != fill_replays.end()) {
      // held across the call: the Python code it runs may forget the kept fills (`eager.reset`)
      PyObject* replay = Py_NewRef(found->second.replay);
      PyObject* memo = Py_NewRef(found->second.memo);
      PyObject* accounted = PyObject_CallNoArgs(replay);
      int done = accounted == nullptr ? -1 : PyObject_IsTrue(accounted);
      Py_XDECREF(accounted);
      Py_DECREF(replay);
      if (done == 1) {
        size_t nbytes = static_cast<size_t>(PyArray_NBYTES(reinterpret_cast<PyArrayObject*>(memo)));
        if (nbytes != 0) {
          std::memcpy(self.mutable_data_ptr(), PyArray_DATA(reinterpret_cast<PyArrayObject*>(memo)), nbytes);
        }
      }
      Py_DECREF(memo);
      if (done < 0) {
        raise_python_error(state);
      }
      if (done == 1) {
        PyGILState_Release(state);
        return self;
      }
    }
  }
  PyObject* tensor = THPVariable_Wrap(self);
  PyObject* number = tensor == nullptr ? nullptr : scalar_object(value);
  PyObject* kept = number == nullptr ? nullptr : PyObject_CallFunctionObjArgs(fill_python_callback, tensor, number, nullptr);
  Py_XDECREF(number);
  Py_XDECREF(tensor);
  if (kept == nullptr) {
    raise_python_error(state);
  }
  if (replayable && PyTuple_Check(kept) && PyTuple_GET_SIZE(kept) == 2) {
    PyObject* replay = PyTuple_GET_ITEM(kept, 0);
    PyObject* memo = PyTuple_GET_ITEM(kept, 1);
    if (PyArray_Check(memo) && PyArray_IS_C_CONTIGUOUS(reinterpret_cast<PyArrayObject*>(memo)) &&
        PyArray_NBYTES(reinterpret_cast<PyArrayObject*>(memo)) ==
            static_cast<npy_intp>(self.numel() * self.element_size()) &&
        fill_replays.find(key) == fill_replays.end()) {
      fill_replays.emplace(std::move(key), FillReplay{Py_NewRef(replay), Py_NewRef(memo)});
    }
  }
  Py_DECREF(kept);
  PyGILState_Release(state);
  return self;
}

// NumPy's own type of a torch dtype's elements, as `torch.Tensor.numpy` gives them; NPY_NOTYPE for the others.
int numpy_type(c10::ScalarType scalar_type) {
  switch (scalar_type) {
    case c10::ScalarType::Float:
      return NPY_FLOAT32;
    case c10::ScalarType::Double:
      return NPY_FLOAT64;
    case c10::ScalarType::Half:
      return NPY_FLOAT16;
    case c10::ScalarType::Long:
      return NPY_INT64;
    case c10::ScalarType::Int:
      return NPY_INT32;
    case c10::ScalarType::Short:
      return NPY_INT16;
    case c10::ScalarType::Char:
      return NPY_INT8;
    case c10::ScalarType::Byte:
      return NPY_UINT8;
    case c10::ScalarType::Bool:
      return NPY_BOOL;
    case c10::ScalarType::ComplexFloat:
      return NPY_COMPLEX64;
    default:
      return NPY_NOTYPE;
  }
}

PyObject* sizes_object(c10::IntArrayRef sizes) {
  PyObject* tuple = PyTuple_New(static_cast<Py_ssize_t>(sizes.size()));
  for (size_t axis = 0; tuple != nullptr && axis < sizes.size(); ++axis) {
    PyObject* size = PyLong_FromLongLong(sizes[axis]);
    if (size == nullptr) {
      Py_CLEAR(tuple);
      break;
    }
    PyTuple_SET_ITEM(tuple, static_cast<Py_ssize_t>(axis), size);
  }
  return tuple;
}

// A new device tensor of `size`: made here when its layout is contiguous (row-major `stride`, or no stride and a
// contiguous or preserved memory format) and the device memory's space is native, else by the Python kernel
// (`dispatch._empty_strided` / `_empty_memory_format`), which also raises the out-of-memory error.
at::Tensor empty_on_device(
    c10::IntArrayRef size, std::optional<c10::IntArrayRef> stride, std::optional<at::ScalarType> dtype,
    std::optional<at::MemoryFormat> memory_format) {
  auto scalar_type = dtype.value_or(c10::typeMetaToScalarType(c10::get_default_dtype()));
  PyGILState_STATE state = PyGILState_Ensure();
  PyObject* space = device_space();
  if (space != nullptr) {
    std::vector<int64_t> sizes(size.begin(), size.end());
    std::vector<int64_t> strides(sizes.size());
    int64_t numel = 1;
    int64_t step = 1;
    bool valid = true;
    for (size_t axis = sizes.size(); axis-- > 0;) {
      valid = valid && sizes[axis] >= 0;  // a negative size: the Python path's error
      strides[axis] = step;
      step *= std::max<int64_t>(sizes[axis], 1);
      numel *= sizes[axis];
    }
    bool contiguous = stride.has_value()
        ? c10::IntArrayRef(strides) == *stride
        : !memory_format.has_value() || *memory_format == at::MemoryFormat::Contiguous ||
            *memory_format == at::MemoryFormat::Preserve;
    if (valid && contiguous) {
      at::Tensor tensor;
      PyObject* block = nullptr;
      PyObject* wrapped = nullptr;
      // the array a program reads or writes the tensor through (the loss gradient a backward graph takes), kept
      // as `fresh_tensor` keeps a result's, for the dtypes NumPy has itself (ml_dtypes' ones are made on use)
      int element_type = numpy_type(scalar_type);
      PyObject* element =
          element_type == NPY_NOTYPE ? nullptr : reinterpret_cast<PyObject*>(PyArray_DescrFromType(element_type));
      PyObject* typed = nullptr;
      int made = fresh_block_tensor(
          space, sizes, strides, numel, scalar_type, block_attribute, tensor, &block, &wrapped, element, &typed);
      if (made < 0) {
        Py_XDECREF(element);
        raise_python_error(state);
      }
      if (made == 0) {
        Py_XDECREF(element);
      }
      if (made > 0) {
        PyObject* array = Py_NewRef(Py_None);
        if (element != nullptr) {
          PyObject* shape = sizes_object(size);
          Py_SETREF(
              array,
              shape == nullptr
                  ? nullptr
                  : block_array(
                        reinterpret_cast<BlockObject*>(block), wrapped, sizes, shape,
                        reinterpret_cast<PyObject*>(torch::getTHPDtype(scalar_type)), element, arrays_attribute,
                        typed));
          Py_XDECREF(shape);
          Py_DECREF(element);
        }
        Py_XDECREF(typed);
        Py_DECREF(block);
        Py_DECREF(wrapped);  // torch keeps the storage's Python object (and its block) while the storage lives
        if (array == nullptr) {
          raise_python_error(state);
        }
        Py_DECREF(array);
        PyGILState_Release(state);
        return tensor;
      }
    }
  }
  PyObject* sizes = sizes_object(size);
  PyObject* strides = !stride.has_value() ? Py_NewRef(Py_None) : sizes_object(*stride);
  PyObject* format = memory_format.has_value() ? torch::utils::getTHPMemoryFormat(*memory_format) : Py_None;  // borrowed
  PyObject* result = sizes == nullptr || strides == nullptr
      ? nullptr
      : PyObject_CallFunctionObjArgs(
            empty_python_callback, sizes, strides, reinterpret_cast<PyObject*>(torch::getTHPDtype(scalar_type)), format,
            nullptr);
  Py_XDECREF(sizes);
  Py_XDECREF(strides);
  if (result == nullptr) {
    raise_python_error(state);
  }
  if (!THPVariable_Check(result)) {
    Py_DECREF(result);
    PyErr_SetString(PyExc_TypeError, "the device's empty kernel returned something other than a tensor");
    raise_python_error(state);
  }
  at::Tensor tensor = THPVariable_Unpack(result);
  Py_DECREF(result);
  PyGILState_Release(state);
  return tensor;
}

at::Tensor empty_memory_format(
    c10::IntArrayRef size, std::optional<at::ScalarType> dtype, std::optional<at::Layout>, std::optional<at::Device>,
    std::optional<bool>, std::optional<at::MemoryFormat> memory_format) {
  return empty_on_device(size, std::nullopt, dtype, memory_format);
}

at::Tensor empty_strided(
    c10::IntArrayRef size, c10::IntArrayRef stride, std::optional<at::ScalarType> dtype, std::optional<at::Layout>,
    std::optional<at::Device>, std::optional<bool>) {
  return empty_on_device(size, stride, dtype, std::nullopt);
}

torch::Library* kernel_library = nullptr;  // lives as long as the process: its registrations are the kernels

}  // namespace
}  // namespace neuron

extern "C" {

// Registers the kernels of `fill_.Scalar`, `empty.memory_format` and `empty_strided` above, with their Python side:
// `fill_python(tensor, value) -> None | (replay, memo)`, `empty_python(size, stride | None, dtype, memory_format |
// None) -> tensor`, `attribute`, the storage attribute holding a block, `arrays`, the one holding the arrays kept
// over its bytes, and `storage_globals`, the globals of storage.py, whose `_memory` is the device memory. False with a
// Python exception set when torch refuses a registration.
bool neuron_register_device_kernels(
    PyObject* fill_python, PyObject* empty_python, PyObject* attribute, PyObject* arrays, PyObject* storage_globals) {
  PyGILState_STATE state = PyGILState_Ensure();
  bool done = neuron::numpy_api_ready() && PyDict_Check(storage_globals);
  if (done && neuron::memory_name == nullptr) {
    neuron::memory_name = PyUnicode_InternFromString("_memory");
    neuron::space_name = PyUnicode_InternFromString("space");
    done = neuron::memory_name != nullptr && neuron::space_name != nullptr;
  }
  if (done) {
    for (auto [slot, value] : {std::pair{&neuron::fill_python_callback, fill_python},
                               {&neuron::empty_python_callback, empty_python},
                               {&neuron::block_attribute, attribute},
                               {&neuron::arrays_attribute, arrays},
                               {&neuron::storage_namespace, storage_globals}}) {
      Py_INCREF(value);
      Py_XSETREF(*slot, value);
    }
    try {
      if (neuron::kernel_library == nullptr) {
        neuron::kernel_library = new torch::Library(
            torch::Library::IMPL, "aten", c10::DispatchKey::PrivateUse1, __FILE__, __LINE__);
        neuron::kernel_library->impl("fill_.Scalar", TORCH_FN(neuron::fill_scalar));
        neuron::kernel_library->impl("empty.memory_format", TORCH_FN(neuron::empty_memory_format));
        neuron::kernel_library->impl("empty_strided", TORCH_FN(neuron::empty_strided));
      }
    } catch (const std::exception& error) {
      PyErr_SetString(PyExc_RuntimeError, error.what());
      done = false;
    }
  }
  PyGILState_Release(state);
  return done;
}

// Forgets the fills kept for replay (the eager programs were forgotten: `eager.reset`).
void neuron_forget_fills() {
  PyGILState_STATE state = PyGILState_Ensure();
  auto kept = std::move(neuron::fill_replays);
  neuron::fill_replays.clear();
  for (auto& [key, replay] : kept) {
    Py_DECREF(replay.replay);
    Py_DECREF(replay.memo);
  }
  PyGILState_Release(state);
}

}  // extern "C"
