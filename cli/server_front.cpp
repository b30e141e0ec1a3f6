// The front of serve and fleet (server_front.hpp).
#include "server_front.hpp"

#include <csignal>
#include <fstream>
#include <iostream>
#include <memory>

#include "commands.hpp"
#include "gpustream/terminal_text.hpp"
#include "gpustream/transport/address.hpp"
#include "say.hpp"
#include "token_file.hpp"

namespace gpustream::cli {

bool start_server(transport::Server& server) {
  try {
    server.start();
  } catch (const boost::system::system_error& e) {
    say("cannot listen: " + e.code().message(), LogLevel::error);
    return false;
  } catch (const std::runtime_error& e) {
    // TLS: an unreadable or mismatched certificate or key (the message names the file).
    say("cannot listen: TLS: " + terminal_safe(e.what()), LogLevel::error);
    return false;
  }
  return true;
}

void announce_listening(const transport::Server& server, bool with_token,
                        const DashboardLine& dashboard) {
  // stdout keeps "listening http|tcp ADDR" whatever the scheme (scripts read it); stderr says
  // the URLs to use.
  const bool tls = server.counters().tls;
  if (const auto ep = server.http_endpoint()) {
    std::cout << "listening http " << transport::to_string(*ep) << std::endl;
    say(std::string(dashboard.what) + " at " + (tls ? "https://" : "http://") +
        transport::to_string(*ep) + std::string(dashboard.path) + (with_token ? "?token=..." : "") +
        std::string(dashboard.tail));
    if (tls) say("TLS on: WebSocket stream at wss://" + transport::to_string(*ep) + "/ws");
  }
  if (const auto ep = server.tcp_endpoint()) {
    std::cout << "listening tcp " << transport::to_string(*ep) << std::endl;
    if (tls) say("TLS on: TCP stream at tls://" + transport::to_string(*ep));
  }
}

SignalStop::SignalStop(boost::asio::io_context& io)
    : io_(io), signals_(io, SIGINT, SIGTERM), hangup_(io, SIGHUP) {}

SignalStop::~SignalStop() {
  stop_reloads();
  if (reload_thread_.joinable()) reload_thread_.join();
}

void SignalStop::request_reload() {
  std::lock_guard lock(reload_mu_);
  reload_requested_ = true;
  reload_cv_.notify_one();
}

void SignalStop::stop_reloads() {
  std::lock_guard lock(reload_mu_);
  reloads_stopped_ = true;
  reload_cv_.notify_one();
}

void SignalStop::reload_loop(const std::function<void()>& reload) {
  std::unique_lock lock(reload_mu_);
  while (true) {
    reload_cv_.wait(lock, [&] { return reload_requested_ || reloads_stopped_; });
    if (reloads_stopped_) return;
    reload_requested_ = false;  // the SIGHUPs from here on ask for one more
    lock.unlock();
    reload();  // ReloadRegistry::reload catches what its parts throw
    lock.lock();
  }
}

void SignalStop::run(const std::function<void()>& stop, const std::function<void()>& stop_early,
                     const std::function<void()>& reload) {
  if (reload && !reload_thread_.joinable())
    reload_thread_ = std::thread([this, &reload] { reload_loop(reload); });
  bool stopping = false;
  std::function<void()> wait_hangup;
  wait_hangup = [&] {
    hangup_.async_wait([&](const boost::system::error_code& ec, int) {
      if (ec) return;
      if (!stopping && reload) request_reload();
      wait_hangup();
    });
  };
  wait_hangup();
  int caught = 0;
  std::function<void()> wait_signal;
  wait_signal = [&] {
    signals_.async_wait([&](const boost::system::error_code& ec, int) {
      if (ec) return;
      if (++caught == 1) {
        say("stopping");
        stopping = true;
        hangup_.cancel();
        stop_reloads();
        stop();
        wait_signal();
      } else {
        io_.stop();  // a second signal: do not wait for the clients
      }
    });
  };
  wait_signal();
  if (g_interrupted.load()) {  // a signal before the set existed
    stopping = true;
    hangup_.cancel();
    stop_reloads();
    stop_early();
  }
  io_.run();
  // `reload` is the caller's and lives until run() returns: the thread ends before that.
  stop_reloads();
  if (reload_thread_.joinable()) reload_thread_.join();
}

Reloader token_reloader(transport::Server& server, std::string token_file, std::string token) {
  auto last = std::make_shared<std::string>(std::move(token));
  return [&server, token_file = std::move(token_file), last](const ReloadInput&) {
    if (token_file.empty()) return ReloadStep::unchanged();
    std::string token;
    try {
      token = read_token_file(token_file);
    } catch (const std::exception& e) {
      return ReloadStep::failed(std::string("cannot reload the token: ") + e.what() +
                                "; the old token stays");
    }
    if (token == *last) return ReloadStep::unchanged();
    if (!server.set_token(token))
      return ReloadStep::failed("the token was not changed (the server has none)");
    *last = std::move(token);
    return ReloadStep::changed("the token file '" + token_file +
                               "' was reloaded: a new token is required from now on (connected "
                               "clients stay)");
  };
}

namespace {

/// The content of the TLS files (each read up to 1 MiB; an unreadable one reads as a marker), to
/// tell a reload that changes them from one that does not.
std::string tls_files_content(const transport::TlsFiles& f) {
  constexpr std::size_t kMax = std::size_t{1} << 20;
  std::string all;
  for (const auto* path : {&f.cert_file, &f.key_file, &f.client_ca_file}) {
    all += '\0';
    if (path->empty()) continue;
    std::ifstream in(*path, std::ios::binary);
    if (!in) {
      all += "\x01unreadable";
      continue;
    }
    std::string buf(kMax, '\0');
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    buf.resize(static_cast<std::size_t>(in.gcount()));
    all += buf;
  }
  return all;
}

}  // namespace

Reloader tls_reloader(transport::Server& server, std::optional<transport::TlsFiles> files) {
  if (!files) return [](const ReloadInput&) { return ReloadStep::unchanged(); };
  auto last = std::make_shared<std::string>(tls_files_content(*files));
  return [&server, files = *files, last](const ReloadInput&) {
    std::string now = tls_files_content(files);
    if (now == *last) return ReloadStep::unchanged();
    // New certificates for new connections; open ones keep theirs. A failure keeps the old.
    const auto error = server.reload_tls();
    if (!error.empty())
      return ReloadStep::failed("cannot reload TLS: " + terminal_safe(error) +
                                "; the old certificate stays");
    *last = std::move(now);
    return ReloadStep::changed(
        "the TLS certificate and key were reloaded (new connections use them; open ones stay)");
  };
}

std::function<Config()> config_loader(const std::string& config_file,
                                      std::function<Config()> load) {
  if (config_file.empty()) return {};
  return load;
}

std::function<std::string()> with_reload_metrics(std::function<std::string()> extra,
                                                 const ReloadRegistry& registry) {
  return [extra = std::move(extra), &registry] {
    return (extra ? extra() : std::string()) + registry.metrics();
  };
}

}  // namespace gpustream::cli
