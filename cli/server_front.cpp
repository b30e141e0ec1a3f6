// The front of serve and fleet (server_front.hpp).
#include "server_front.hpp"

#include <csignal>
#include <iostream>

#include "commands.hpp"
#include "gpustream/transport/address.hpp"

namespace gpustream::cli {

bool start_server(transport::Server& server) {
  try {
    server.start();
  } catch (const boost::system::system_error& e) {
    std::cerr << "gpustream: cannot listen: " << e.code().message() << "\n";
    return false;
  }
  return true;
}

void announce_listening(const transport::Server& server, bool with_token,
                        const DashboardLine& dashboard) {
  if (const auto ep = server.http_endpoint()) {
    std::cout << "listening http " << transport::to_string(*ep) << std::endl;
    std::cerr << "gpustream: " << dashboard.what << " at http://" << transport::to_string(*ep)
              << dashboard.path << (with_token ? "?token=..." : "") << dashboard.tail << "\n";
  }
  if (const auto ep = server.tcp_endpoint())
    std::cout << "listening tcp " << transport::to_string(*ep) << std::endl;
}

SignalStop::SignalStop(boost::asio::io_context& io) : io_(io), signals_(io, SIGINT, SIGTERM) {}

void SignalStop::run(const std::function<void()>& stop, const std::function<void()>& stop_early) {
  int caught = 0;
  std::function<void()> wait_signal;
  wait_signal = [&] {
    signals_.async_wait([&](const boost::system::error_code& ec, int) {
      if (ec) return;
      if (++caught == 1) {
        std::cerr << "gpustream: stopping\n";
        stop();
        wait_signal();
      } else {
        io_.stop();  // a second signal: do not wait for the clients
      }
    });
  };
  wait_signal();
  if (g_interrupted.load()) stop_early();  // a signal before the set existed
  io_.run();
}

}  // namespace gpustream::cli
