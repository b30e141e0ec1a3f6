// A throw-away PKI for the TLS tests, made with OpenSSL's API at test time (nothing is
// committed): CAs, server and client certificates (EC P-256, SHA-256) with chosen names and
// validity, written as PEM files into a fresh temporary directory that is removed afterwards.
#pragma once

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

namespace gpustream::transport::test {

class TestPki {
 public:
  /// A certificate and its key, in memory and as files.
  struct Issued {
    std::shared_ptr<X509> cert;
    std::shared_ptr<EVP_PKEY> key;
    std::string cert_file, key_file;
  };
  struct Spec {
    std::string cn;
    std::string sans;  // "IP:127.0.0.1,DNS:localhost"; empty: none
    long not_before_seconds = -3600;
    long not_after_seconds = 86400;
    bool ca = false;
  };

  TestPki() {
    dir_ = std::filesystem::temp_directory_path() /
           ("gpustream-tls-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter()++));
    std::filesystem::create_directories(dir_);
  }
  ~TestPki() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  TestPki(const TestPki&) = delete;
  TestPki& operator=(const TestPki&) = delete;

  const std::filesystem::path& dir() const { return dir_; }

  Issued ca(const std::string& name) {
    return issue({name, "", -3600, 86400 * 30, true}, nullptr, name);
  }
  /// A leaf signed by `issuer` (files `<file>.crt`, `<file>.key`).
  Issued leaf(const Issued& issuer, const Spec& spec, const std::string& file) {
    return issue(spec, &issuer, file);
  }
  /// A file holding `text` (e.g. not a certificate).
  std::string write(const std::string& file, const std::string& text) {
    const auto p = (dir_ / file).string();
    std::ofstream(p) << text;
    return p;
  }

 private:
  static int& counter() {
    static int n = 0;
    return n;
  }

  static void add_ext(X509* x, X509V3_CTX* ctx, int nid, const std::string& value) {
    X509_EXTENSION* e = X509V3_EXT_conf_nid(nullptr, ctx, nid, value.c_str());
    if (!e) throw std::runtime_error("test PKI: bad extension " + value);
    X509_add_ext(x, e, -1);
    X509_EXTENSION_free(e);
  }

  static std::string pem_of(X509* x) {
    BIO* b = BIO_new(BIO_s_mem());
    PEM_write_bio_X509(b, x);
    char* data = nullptr;
    const long n = BIO_get_mem_data(b, &data);
    std::string out(data, static_cast<std::size_t>(n));
    BIO_free(b);
    return out;
  }
  static std::string pem_of(EVP_PKEY* k) {
    BIO* b = BIO_new(BIO_s_mem());
    PEM_write_bio_PrivateKey(b, k, nullptr, nullptr, 0, nullptr, nullptr);
    char* data = nullptr;
    const long n = BIO_get_mem_data(b, &data);
    std::string out(data, static_cast<std::size_t>(n));
    BIO_free(b);
    return out;
  }

  Issued issue(const Spec& s, const Issued* issuer, const std::string& file) {
    Issued out;
    out.key.reset(EVP_EC_gen("P-256"), EVP_PKEY_free);
    if (!out.key) throw std::runtime_error("test PKI: key generation failed");
    out.cert.reset(X509_new(), X509_free);
    X509* x = out.cert.get();
    X509_set_version(x, 2);
    ASN1_INTEGER_set(X509_get_serialNumber(x), ++serial_);
    X509_gmtime_adj(X509_getm_notBefore(x), s.not_before_seconds);
    X509_gmtime_adj(X509_getm_notAfter(x), s.not_after_seconds);
    X509_set_pubkey(x, out.key.get());
    X509_NAME* name = X509_get_subject_name(x);
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                               reinterpret_cast<const unsigned char*>(s.cn.c_str()), -1, -1, 0);
    X509* signer = issuer ? issuer->cert.get() : x;
    X509_set_issuer_name(x, X509_get_subject_name(signer));
    X509V3_CTX ctx;
    X509V3_set_ctx_nodb(&ctx);
    X509V3_set_ctx(&ctx, signer, x, nullptr, nullptr, 0);
    add_ext(x, &ctx, NID_basic_constraints, s.ca ? "critical,CA:TRUE" : "CA:FALSE");
    add_ext(x, &ctx, NID_key_usage,
            s.ca ? "critical,keyCertSign,cRLSign" : "critical,digitalSignature");
    add_ext(x, &ctx, NID_subject_key_identifier, "hash");
    if (!s.ca) add_ext(x, &ctx, NID_ext_key_usage, "serverAuth,clientAuth");
    if (!s.sans.empty()) add_ext(x, &ctx, NID_subject_alt_name, s.sans);
    if (X509_sign(x, issuer ? issuer->key.get() : out.key.get(), EVP_sha256()) == 0)
      throw std::runtime_error("test PKI: signing failed");
    out.cert_file = write(file + ".crt", pem_of(x));
    out.key_file = write(file + ".key", pem_of(out.key.get()));
    return out;
  }

  std::filesystem::path dir_;
  long serial_ = 0;
};

}  // namespace gpustream::transport::test
