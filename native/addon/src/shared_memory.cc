#include "shared_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <limits>

#include "class_registry.h"

namespace memlane::addon {

void Mapping::Unmap() {
  if (data != nullptr) munmap(data, length);
  data = nullptr;
}

namespace {

// Same rule as python/memlane_worker/shm.py: a plain name, no path separators.
bool ValidName(const std::string& name) {
  if (name.empty() || name.size() > 250 || name == "." || name == "..") return false;
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

[[noreturn]] void ThrowErrno(Napi::Env env, const char* syscall, const std::string& name, int err) {
  Napi::Error e = Napi::Error::New(
      env, std::string(syscall) + "(\"/" + name + "\") failed: " + std::strerror(err));
  e.Set("code", Napi::String::New(env, "SHM_UNAVAILABLE"));
  e.Set("errno", Napi::Number::New(env, err));
  e.Set("syscall", Napi::String::New(env, syscall));
  e.Set("segment", Napi::String::New(env, name));
  throw e;
}

// Unmaps the mapping when the ArrayBuffer is collected, unless close({unmap: true}) already did.
void UnmapOnCollect(Napi::Env /*env*/, void* /*data*/, std::shared_ptr<Mapping>* hint) {
  (*hint)->Unmap();
  delete hint;
}

// Closes the descriptor on every path: the mapping outlives it.
struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) close(fd);
  }
};

}  // namespace

void SharedMemory::Init(Napi::Env env, Napi::Object exports) {
  Napi::Function ctor = DefineClass(
      env, "SharedMemory",
      {StaticMethod<&SharedMemory::Unlink>("unlink"),
       InstanceAccessor<&SharedMemory::Name>("name"),
       InstanceAccessor<&SharedMemory::Size>("size"),
       InstanceAccessor<&SharedMemory::ReadOnly>("readOnly"),
       InstanceAccessor<&SharedMemory::Buffer>("buffer"),
       InstanceMethod<&SharedMemory::Close>("close")});
  exports.Set("SharedMemory", ctor);
}

SharedMemory::SharedMemory(const Napi::CallbackInfo& info) : Napi::ObjectWrap<SharedMemory>(info) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !info[0].IsString())
    throw Napi::TypeError::New(env, "SharedMemory(name, options): name must be a string");
  name_ = info[0].As<Napi::String>().Utf8Value();
  if (!ValidName(name_))
    throw Napi::TypeError::New(env, "SharedMemory: name must match [A-Za-z0-9._-]{1,250}, got \"" + name_ + "\"");
  bool create = false;
  bool populate = false;
  double want = 0;
  if (info.Length() > 1 && info[1].IsObject()) {
    Napi::Object o = info[1].As<Napi::Object>();
    create = o.Get("create").ToBoolean().Value();
    populate = o.Get("populate").ToBoolean().Value();
    read_only_ = o.Get("readOnly").ToBoolean().Value();
    if (create) {
      Napi::Value s = o.Get("size");
      if (!s.IsNumber() || s.As<Napi::Number>().DoubleValue() < 0 ||
          s.As<Napi::Number>().DoubleValue() > static_cast<double>(std::numeric_limits<off_t>::max()))
        throw Napi::TypeError::New(env, "SharedMemory: option `size` must be a non-negative number of bytes when creating");
      want = s.As<Napi::Number>().DoubleValue();
    }
  }
  if (create && read_only_) throw Napi::TypeError::New(env, "SharedMemory: `create` and `readOnly` exclude each other");

  const std::string path = "/" + name_;
  Fd fd{create ? shm_open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600)
               : shm_open(path.c_str(), (read_only_ ? O_RDONLY : O_RDWR) | O_CLOEXEC, 0)};
  if (fd.fd < 0) ThrowErrno(env, "shm_open", name_, errno);
  if (create) {
    size_ = static_cast<size_t>(want);
    if (ftruncate(fd.fd, static_cast<off_t>(size_)) != 0) {
      int err = errno;
      shm_unlink(path.c_str());  // do not leave a half-made segment behind
      ThrowErrno(env, "ftruncate", name_, err);
    }
  } else {
    struct stat st;
    if (fstat(fd.fd, &st) != 0) ThrowErrno(env, "fstat", name_, errno);
    size_ = static_cast<size_t>(st.st_size);
  }

  Napi::ArrayBuffer ab;
  if (size_ == 0) {
    ab = Napi::ArrayBuffer::New(env, 0);  // mmap refuses a zero length
  } else {
    // JavaScript has no read-only ArrayBuffer, and a store into a PROT_READ page would kill
    // the process: a read-only open maps copy-on-write instead, so a stray write stays in
    // this process and never reaches the segment.
    // populate: fault every page in now, in one call (a writer about to fill the whole
    // segment otherwise pays one page fault per 4 KiB).
    int flags = (read_only_ ? MAP_PRIVATE : MAP_SHARED) | (populate ? MAP_POPULATE : 0);
    void* data = mmap(nullptr, size_, PROT_READ | PROT_WRITE, flags, fd.fd, 0);
    if (data == MAP_FAILED) {
      int err = errno;
      if (create) shm_unlink(path.c_str());
      ThrowErrno(env, "mmap", name_, err);
    }
    mapping_ = std::make_shared<Mapping>();
    mapping_->data = data;
    mapping_->length = size_;
    ab = Napi::ArrayBuffer::New(env, data, size_, UnmapOnCollect, new std::shared_ptr<Mapping>(mapping_));
  }
  buffer_ = Napi::Reference<Napi::ArrayBuffer>::New(ab, 1);
}

Napi::Value SharedMemory::Unlink(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !info[0].IsString())
    throw Napi::TypeError::New(env, "SharedMemory.unlink(name): name must be a string");
  std::string name = info[0].As<Napi::String>().Utf8Value();
  if (!ValidName(name)) throw Napi::TypeError::New(env, "SharedMemory.unlink: invalid segment name \"" + name + "\"");
  if (shm_unlink(("/" + name).c_str()) == 0) return Napi::Boolean::New(env, true);
  if (errno == ENOENT) return Napi::Boolean::New(env, false);
  ThrowErrno(env, "shm_unlink", name, errno);
}

Napi::Value SharedMemory::Name(const Napi::CallbackInfo& info) { return Napi::String::New(info.Env(), name_); }
Napi::Value SharedMemory::Size(const Napi::CallbackInfo& info) {
  return Napi::Number::New(info.Env(), static_cast<double>(size_));
}
Napi::Value SharedMemory::ReadOnly(const Napi::CallbackInfo& info) { return Napi::Boolean::New(info.Env(), read_only_); }

Napi::Value SharedMemory::Buffer(const Napi::CallbackInfo& info) {
  if (buffer_.IsEmpty()) throw Napi::Error::New(info.Env(), "SharedMemory \"" + name_ + "\" is closed");
  return buffer_.Value();
}

Napi::Value SharedMemory::Close(const Napi::CallbackInfo& info) {
  bool unmap = info.Length() > 0 && info[0].IsObject() && info[0].As<Napi::Object>().Get("unmap").ToBoolean().Value();
  if (unmap && !buffer_.IsEmpty()) {
    // Detaching first makes every JavaScript view of the buffer zero-length, so nothing can
    // touch the pages after munmap; the finalizer then finds the mapping gone.
    Napi::ArrayBuffer ab = buffer_.Value();
    if (ab.ByteLength() > 0) ab.Detach();
    if (mapping_) mapping_->Unmap();
  }
  if (!buffer_.IsEmpty()) buffer_.Reset();
  return info.Env().Undefined();
}

MEMLANE_ADDON_CLASS(SharedMemory, SharedMemory::Init);

}  // namespace memlane::addon
