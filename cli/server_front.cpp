// The front of serve and fleet (server_front.hpp).
#include "server_front.hpp"

#include <csignal>
#include <iostream>
#include <memory>

#include "commands.hpp"
#include "gpustream/terminal_text.hpp"
#include "gpustream/transport/address.hpp"
#include "token_file.hpp"

namespace gpustream::cli {

bool start_server(transport::Server& server) {
  try {
    server.start();
  } catch (const boost::system::system_error& e) {
    std::cerr << "gpustream: cannot listen: " << e.code().message() << "\n";
    return false;
  } catch (const std::runtime_error& e) {
    // TLS: an unreadable or mismatched certificate or key (the message names the file).
    std::cerr << "gpustream: cannot listen: TLS: " << terminal_safe(e.what()) << "\n";
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
    std::cerr << "gpustream: " << dashboard.what << " at " << (tls ? "https://" : "http://")
              << transport::to_string(*ep) << dashboard.path << (with_token ? "?token=..." : "")
              << dashboard.tail << "\n";
    if (tls)
      std::cerr << "gpustream: TLS on: WebSocket stream at wss://" << transport::to_string(*ep)
                << "/ws\n";
  }
  if (const auto ep = server.tcp_endpoint()) {
    std::cout << "listening tcp " << transport::to_string(*ep) << std::endl;
    if (tls)
      std::cerr << "gpustream: TLS on: TCP stream at tls://" << transport::to_string(*ep) << "\n";
  }
}

SignalStop::SignalStop(boost::asio::io_context& io)
    : io_(io), signals_(io, SIGINT, SIGTERM), hangup_(io, SIGHUP) {}

void SignalStop::run(const std::function<void()>& stop, const std::function<void()>& stop_early,
                     const std::function<void()>& reload) {
  bool stopping = false;
  std::function<void()> wait_hangup;
  wait_hangup = [&] {
    hangup_.async_wait([&](const boost::system::error_code& ec, int) {
      if (ec) return;
      if (!stopping && reload) reload();
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
        std::cerr << "gpustream: stopping\n";
        stopping = true;
        hangup_.cancel();
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
    stop_early();
  }
  io_.run();
}

std::function<void()> reload_on_hangup(transport::Server& server, std::string token_file,
                                       std::string token) {
  auto last = std::make_shared<std::string>(std::move(token));
  return [&server, token_file = std::move(token_file), last] {
    if (server.counters().tls) {
      // New certificates for new connections; open ones keep theirs. A failure keeps the old.
      const auto error = server.reload_tls();
      if (error.empty())
        std::cerr << "gpustream: SIGHUP: the TLS certificate and key were reloaded (new "
                     "connections use them; open ones stay)\n";
      else
        std::cerr << "gpustream: SIGHUP: cannot reload TLS: " << terminal_safe(error)
                  << "; the old certificate stays\n";
      if (token_file.empty()) return;
    }
    if (token_file.empty()) {
      std::cerr << "gpustream: SIGHUP: nothing to reload (no --token); other settings take "
                   "effect on a restart\n";
      return;
    }
    std::string token;
    try {
      token = read_token_file(token_file);
    } catch (const std::exception& e) {
      std::cerr << "gpustream: SIGHUP: cannot reload the token: " << terminal_safe(e.what())
                << "; the old token stays\n";
      return;
    }
    const bool changed = token != *last;
    if (!server.set_token(token)) {
      std::cerr << "gpustream: SIGHUP: the token was not changed (the server has none)\n";
      return;
    }
    *last = std::move(token);
    std::cerr << "gpustream: SIGHUP: the token file '" << terminal_safe(token_file) << "' was "
              << (changed ? "reloaded: a new token is required from now on (connected clients "
                            "stay)"
                          : "reloaded: the token is unchanged")
              << "; other settings take effect on a restart\n";
  };
}

}  // namespace gpustream::cli
