//===- Safetensors.cpp - Host tensors and the safetensors format ----------===//

#include "mk/Safetensors.h"
#include "mk/Json.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <set>

namespace mk {

//===----------------------------------------------------------------------===//
// HostTensor
//===----------------------------------------------------------------------===//

HostTensor::HostTensor(TensorDesc d) : desc(std::move(d)) {
  data.assign(size_t(desc.bytes()), 0);
}

[[noreturn]] static void dtypeMismatch(const TensorDesc &d, DType want) {
  std::fprintf(stderr, "fatal: tensor '%s' is %s, accessed as %s\n",
               d.name.c_str(), dtypeName(d.dtype), dtypeName(want));
  std::abort();
}

#define MK_HOST_TENSOR_ACCESSOR(method, type, dt)                              \
  type *HostTensor::method() {                                                 \
    if (desc.dtype != dt)                                                      \
      dtypeMismatch(desc, dt);                                                 \
    return reinterpret_cast<type *>(data.data());                              \
  }                                                                            \
  const type *HostTensor::method() const {                                     \
    if (desc.dtype != dt)                                                      \
      dtypeMismatch(desc, dt);                                                 \
    return reinterpret_cast<const type *>(data.data());                        \
  }
MK_HOST_TENSOR_ACCESSOR(u8, uint8_t, DType::U8)
MK_HOST_TENSOR_ACCESSOR(bf16, BFloat16, DType::BF16)
MK_HOST_TENSOR_ACCESSOR(f32, float, DType::F32)
MK_HOST_TENSOR_ACCESSOR(i32, int32_t, DType::I32)
#undef MK_HOST_TENSOR_ACCESSOR

std::vector<float> HostTensor::toFloat() const {
  std::vector<float> out(static_cast<size_t>(numel()));
  for (size_t i = 0; i < out.size(); ++i) {
    switch (desc.dtype) {
    case DType::U8:
      out[i] = data[i];
      break;
    case DType::BF16:
      out[i] = bf16()[i].toFloat();
      break;
    case DType::F32:
      out[i] = f32()[i];
      break;
    case DType::I32:
      out[i] = float(i32()[i]);
      break;
    }
  }
  return out;
}

//===----------------------------------------------------------------------===//
// Names
//===----------------------------------------------------------------------===//

const char *safetensorsDTypeName(DType t) {
  switch (t) {
  case DType::U8:
    return "U8";
  case DType::BF16:
    return "BF16";
  case DType::F32:
    return "F32";
  case DType::I32:
    return "I32";
  }
  return "?";
}

bool parseSafetensorsDType(const std::string &s, DType &out) {
  for (DType t : {DType::U8, DType::BF16, DType::F32, DType::I32})
    if (s == safetensorsDTypeName(t)) {
      out = t;
      return true;
    }
  return false;
}

std::string shapeString(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

//===----------------------------------------------------------------------===//
// Writing
//===----------------------------------------------------------------------===//

namespace {

/// The header text, padded with spaces to a multiple of 8 bytes.
std::string encodeHeader(const std::vector<const HostTensor *> &tensors,
                         const std::map<std::string, std::string> &metadata) {
  json::Value root = json::Value::makeObject();
  if (!metadata.empty()) {
    json::Value meta = json::Value::makeObject();
    for (const auto &kv : metadata)
      meta.set(kv.first, json::Value::fromString(kv.second));
    root.set("__metadata__", std::move(meta));
  }
  uint64_t offset = 0;
  for (const HostTensor *t : tensors) {
    json::Value e = json::Value::makeObject();
    e.set("dtype", json::Value::fromString(safetensorsDTypeName(t->desc.dtype)));
    json::Value shape = json::Value::makeArray();
    for (int64_t d : t->desc.shape)
      shape.push(json::Value::fromInt(d));
    e.set("shape", std::move(shape));
    json::Value offs = json::Value::makeArray();
    offs.push(json::Value::fromInt(int64_t(offset)));
    offset += t->data.size();
    offs.push(json::Value::fromInt(int64_t(offset)));
    e.set("data_offsets", std::move(offs));
    root.object.emplace_back(t->desc.name, std::move(e));
  }
  std::string header = json::write(root, -1);
  while (header.size() % 8)
    header += ' ';
  return header;
}

void putLength(uint8_t *p, uint64_t n) {
  for (int i = 0; i < 8; ++i)
    p[i] = uint8_t(n >> (8 * i));
}

} // namespace

std::vector<uint8_t>
encodeSafetensors(const std::vector<const HostTensor *> &tensors,
                  const std::map<std::string, std::string> &metadata) {
  std::string header = encodeHeader(tensors, metadata);
  size_t total = 8 + header.size();
  for (const HostTensor *t : tensors)
    total += t->data.size();
  std::vector<uint8_t> out(total);
  putLength(out.data(), header.size());
  std::memcpy(out.data() + 8, header.data(), header.size());
  size_t at = 8 + header.size();
  for (const HostTensor *t : tensors) {
    if (!t->data.empty())
      std::memcpy(out.data() + at, t->data.data(), t->data.size());
    at += t->data.size();
  }
  return out;
}

bool writeSafetensors(const std::string &path, const TensorMap &tensors,
                      std::string &error,
                      const std::map<std::string, std::string> &metadata) {
  std::vector<const HostTensor *> list;
  for (const auto &kv : tensors) {
    if (kv.first != kv.second.desc.name) {
      error = path + ": tensor map key '" + kv.first +
              "' differs from the tensor's name '" + kv.second.desc.name + "'";
      return false;
    }
    if (int64_t(kv.second.data.size()) != kv.second.desc.bytes()) {
      error = path + ": tensor '" + kv.first + "' holds " +
              std::to_string(kv.second.data.size()) + " bytes, its shape " +
              shapeString(kv.second.desc.shape) + " needs " +
              std::to_string(kv.second.desc.bytes());
      return false;
    }
    list.push_back(&kv.second);
  }
  std::string header = encodeHeader(list, metadata);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) {
    error = path + ": cannot open for writing: " + std::strerror(errno);
    return false;
  }
  uint8_t len[8];
  putLength(len, header.size());
  out.write(reinterpret_cast<const char *>(len), 8);
  out.write(header.data(), std::streamsize(header.size()));
  for (const HostTensor *t : list)
    out.write(reinterpret_cast<const char *>(t->data.data()),
              std::streamsize(t->data.size()));
  out.flush();
  if (!out) {
    error = path + ": write failed: " + std::strerror(errno);
    return false;
  }
  return true;
}

//===----------------------------------------------------------------------===//
// Reading
//===----------------------------------------------------------------------===//

namespace {

// A header larger than this is certainly not ours (the full unit's is ~60 KB).
constexpr uint64_t kMaxHeaderBytes = uint64_t(100) << 20;

struct Entry {
  TensorDesc desc;
  uint64_t begin = 0, end = 0;
  bool valid = false; // dtype, shape and offsets all usable
};

/// Reads `n` bytes at `offset` of the source into `dst`.
using ReadAt = std::function<bool(uint64_t offset, void *dst, uint64_t n)>;

/// Parses the header and validates every entry against the data section's
/// size. Appends one problem per defect; returns the entries found.
std::vector<Entry> parseHeader(uint64_t fileSize, const ReadAt &readAt,
                               std::vector<std::string> &problems,
                               std::map<std::string, std::string> *metadata,
                               uint64_t &dataStart) {
  std::vector<Entry> entries;
  if (fileSize < 8) {
    problems.push_back("file is too short for the 8-byte header length (" +
                       std::to_string(fileSize) + " bytes)");
    return entries;
  }
  uint8_t len[8];
  if (!readAt(0, len, 8)) {
    problems.push_back("cannot read the header length");
    return entries;
  }
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i)
    n |= uint64_t(len[i]) << (8 * i);
  if (n > fileSize - 8 || n > kMaxHeaderBytes) {
    problems.push_back("header length " + std::to_string(n) +
                       " exceeds the file size " + std::to_string(fileSize) +
                       " (truncated or not a safetensors file)");
    return entries;
  }
  std::string text(size_t(n), '\0');
  if (n && !readAt(8, &text[0], n)) {
    problems.push_back("cannot read the header");
    return entries;
  }
  dataStart = 8 + n;
  const uint64_t dataSize = fileSize - dataStart;
  json::Value root;
  std::string err;
  if (!json::parse(text, root, err)) {
    problems.push_back("malformed header: " + err);
    return entries;
  }
  if (!root.isObject()) {
    problems.push_back(std::string("malformed header: expected a JSON object, "
                                   "got ") +
                       json::kindName(root.kind));
    return entries;
  }
  for (const auto &kv : root.object) {
    const std::string &name = kv.first;
    const json::Value &v = kv.second;
    if (name == "__metadata__") {
      if (!v.isObject()) {
        problems.push_back("malformed header: __metadata__ must be an object");
        continue;
      }
      for (const auto &m : v.object) {
        if (!m.second.isString())
          problems.push_back("malformed header: __metadata__ value '" +
                             m.first + "' must be a string");
        else if (metadata)
          (*metadata)[m.first] = m.second.string;
      }
      continue;
    }
    Entry e;
    e.desc.name = name;
    std::string what = "tensor '" + name + "': ";
    if (!v.isObject()) {
      problems.push_back(what + "header entry must be an object");
      entries.push_back(e);
      continue;
    }
    bool ok = true;
    for (const auto &m : v.object)
      if (m.first != "dtype" && m.first != "shape" &&
          m.first != "data_offsets") {
        problems.push_back(what + "unknown header field '" + m.first + "'");
        ok = false;
      }
    const json::Value *dt = v.find("dtype");
    bool dtypeOk = false;
    if (!dt || !dt->isString()) {
      problems.push_back(what + "missing or non-string 'dtype'");
    } else if (!parseSafetensorsDType(dt->string, e.desc.dtype)) {
      problems.push_back(what + "unsupported dtype '" + dt->string +
                         "' (expected U8, BF16, F32 or I32)");
    } else {
      dtypeOk = true;
    }
    ok = ok && dtypeOk;
    const json::Value *shape = v.find("shape");
    bool shapeOk = shape && shape->isArray();
    if (shapeOk) {
      uint64_t numel = 1;
      for (const json::Value &d : shape->array) {
        int64_t x;
        if (!d.getInt(x) || x < 0 || x > (int64_t(1) << 40)) {
          shapeOk = false;
          break;
        }
        e.desc.shape.push_back(x);
        numel *= uint64_t(x);
        if (numel > (uint64_t(1) << 40))
          shapeOk = false;
      }
    }
    if (!shapeOk) {
      problems.push_back(what +
                         "'shape' must be an array of non-negative integers");
      ok = false;
    }
    const json::Value *offs = v.find("data_offsets");
    int64_t b = -1, en = -1;
    if (!offs || !offs->isArray() || offs->array.size() != 2 ||
        !offs->array[0].getInt(b) || !offs->array[1].getInt(en) || b < 0 ||
        en < b) {
      problems.push_back(what + "'data_offsets' must be [begin, end] with "
                                "0 <= begin <= end");
      ok = false;
    } else {
      e.begin = uint64_t(b);
      e.end = uint64_t(en);
      if (e.end > dataSize) {
        problems.push_back(what + "data_offsets [" + std::to_string(b) + ", " +
                           std::to_string(en) +
                           "] out of range: the data section holds " +
                           std::to_string(dataSize) +
                           " bytes (truncated file?)");
        ok = false;
      } else if (dtypeOk && shapeOk &&
                 int64_t(e.end - e.begin) != e.desc.bytes()) {
        problems.push_back(what + "data_offsets [" + std::to_string(b) + ", " +
                           std::to_string(en) + "] hold " +
                           std::to_string(e.end - e.begin) + " bytes but " +
                           dt->string + " " + shapeString(e.desc.shape) +
                           " needs " + std::to_string(e.desc.bytes()));
        ok = false;
      }
    }
    e.valid = ok;
    entries.push_back(e);
  }
  return entries;
}

void compareWithExpected(const std::vector<Entry> &entries,
                         const std::vector<TensorDesc> &expected,
                         std::vector<std::string> &problems) {
  std::map<std::string, const Entry *> byName;
  for (const Entry &e : entries)
    byName[e.desc.name] = &e;
  std::set<std::string> wanted;
  for (const TensorDesc &d : expected) {
    wanted.insert(d.name);
    auto it = byName.find(d.name);
    if (it == byName.end()) {
      problems.push_back("tensor '" + d.name + "': missing (expected " +
                         safetensorsDTypeName(d.dtype) + " " +
                         shapeString(d.shape) + ")");
      continue;
    }
    const Entry &e = *it->second;
    if (e.desc.dtype != d.dtype && !e.desc.name.empty() && e.valid)
      problems.push_back("tensor '" + d.name + "': dtype " +
                         safetensorsDTypeName(e.desc.dtype) + ", expected " +
                         safetensorsDTypeName(d.dtype));
    if (e.desc.shape != d.shape && e.valid)
      problems.push_back("tensor '" + d.name + "': shape " +
                         shapeString(e.desc.shape) + ", expected " +
                         shapeString(d.shape));
  }
  for (const Entry &e : entries)
    if (!wanted.count(e.desc.name))
      problems.push_back("tensor '" + e.desc.name + "': unexpected");
}

bool loadFrom(uint64_t fileSize, const ReadAt &readAt,
              const std::vector<TensorDesc> *expected, TensorMap &out,
              std::vector<std::string> &problems,
              std::map<std::string, std::string> *metadata) {
  size_t before = problems.size();
  uint64_t dataStart = 0;
  std::map<std::string, std::string> meta;
  std::vector<Entry> entries =
      parseHeader(fileSize, readAt, problems, &meta, dataStart);
  if (expected)
    compareWithExpected(entries, *expected, problems);
  if (problems.size() != before)
    return false;
  TensorMap result;
  for (const Entry &e : entries) {
    HostTensor t(e.desc);
    if (!t.data.empty() &&
        !readAt(dataStart + e.begin, t.data.data(), t.data.size())) {
      problems.push_back("tensor '" + e.desc.name + "': read failed");
      return false;
    }
    result.emplace(e.desc.name, std::move(t));
  }
  out = std::move(result);
  if (metadata)
    *metadata = std::move(meta);
  return true;
}

bool loadFile(const std::string &path, const std::vector<TensorDesc> *expected,
              TensorMap &out, std::vector<std::string> &problems,
              std::map<std::string, std::string> *metadata) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    problems.push_back(path + ": cannot open: " + std::strerror(errno));
    return false;
  }
  in.seekg(0, std::ios::end);
  std::streamoff size = in.tellg();
  if (size < 0) {
    problems.push_back(path + ": cannot determine the file size");
    return false;
  }
  ReadAt readAt = [&](uint64_t offset, void *dst, uint64_t n) {
    in.clear();
    in.seekg(std::streamoff(offset));
    in.read(static_cast<char *>(dst), std::streamsize(n));
    return bool(in) && uint64_t(in.gcount()) == n;
  };
  size_t before = problems.size();
  bool ok = loadFrom(uint64_t(size), readAt, expected, out, problems, metadata);
  for (size_t i = before; i < problems.size(); ++i)
    problems[i] = path + ": " + problems[i];
  return ok;
}

} // namespace

bool decodeSafetensors(const std::vector<uint8_t> &bytes, TensorMap &out,
                       std::vector<std::string> &problems,
                       std::map<std::string, std::string> *metadata) {
  ReadAt readAt = [&](uint64_t offset, void *dst, uint64_t n) {
    if (offset > bytes.size() || n > bytes.size() - offset)
      return false;
    std::memcpy(dst, bytes.data() + offset, size_t(n));
    return true;
  };
  return loadFrom(bytes.size(), readAt, nullptr, out, problems, metadata);
}

bool readSafetensors(const std::string &path, TensorMap &out,
                     std::vector<std::string> &problems,
                     std::map<std::string, std::string> *metadata) {
  return loadFile(path, nullptr, out, problems, metadata);
}

bool loadCheckedSafetensors(const std::string &path,
                            const std::vector<TensorDesc> &expected,
                            TensorMap &out,
                            std::vector<std::string> &problems) {
  return loadFile(path, &expected, out, problems, nullptr);
}

bool checkTensors(const TensorMap &tensors,
                  const std::vector<TensorDesc> &expected,
                  std::vector<std::string> &problems) {
  std::vector<Entry> entries;
  size_t before = problems.size();
  for (const auto &kv : tensors) {
    Entry e;
    e.desc = kv.second.desc;
    e.desc.name = kv.first;
    e.valid = true;
    if (int64_t(kv.second.data.size()) != kv.second.desc.bytes()) {
      problems.push_back("tensor '" + kv.first + "': holds " +
                         std::to_string(kv.second.data.size()) +
                         " bytes, its shape needs " +
                         std::to_string(kv.second.desc.bytes()));
    }
    entries.push_back(e);
  }
  compareWithExpected(entries, expected, problems);
  return problems.size() == before;
}

} // namespace mk
