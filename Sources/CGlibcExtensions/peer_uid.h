/* The owner of a loopback TCP peer, from the kernel's socket table (NETLINK_SOCK_DIAG,
 * inet_diag): the loopback redirect listener serves only connections of its own user. */
#include <errno.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* The uid owning the IPv4 TCP socket whose local end is local_addr:local_port and remote end
 * remote_addr:remote_port (all four in network byte order): 0 with *uid set, or -1 with errno.
 * ENOENT: no such socket, or one no process holds any more (a closed or time-wait socket,
 * whose owner the kernel reports as 0); ETIMEDOUT: the kernel did not answer within a second. */
static inline int tokenstore_tcp4_socket_owner(uint32_t local_addr, uint16_t local_port, uint32_t remote_addr,
                                               uint16_t remote_port, uint32_t *uid) {
    int fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
    if (fd < 0) return -1;
    struct {
        struct nlmsghdr header;
        struct inet_diag_req_v2 request;
    } message;
    memset(&message, 0, sizeof message);
    message.header.nlmsg_len = sizeof message;
    message.header.nlmsg_type = SOCK_DIAG_BY_FAMILY;
    message.header.nlmsg_flags = NLM_F_REQUEST; /* no NLM_F_DUMP: an exact 4-tuple lookup */
    message.header.nlmsg_seq = 1;
    message.request.sdiag_family = AF_INET;
    message.request.sdiag_protocol = IPPROTO_TCP;
    message.request.idiag_states = ~0u;
    message.request.id.idiag_sport = local_port;
    message.request.id.idiag_dport = remote_port;
    message.request.id.idiag_src[0] = local_addr;
    message.request.id.idiag_dst[0] = remote_addr;
    message.request.id.idiag_cookie[0] = INET_DIAG_NOCOOKIE;
    message.request.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
    struct sockaddr_nl kernel;
    memset(&kernel, 0, sizeof kernel);
    kernel.nl_family = AF_NETLINK;
    ssize_t sent;
    do {
        sent = sendto(fd, &message, sizeof message, 0, (struct sockaddr *)&kernel, sizeof kernel);
    } while (sent < 0 && errno == EINTR);
    if (sent != (ssize_t)sizeof message) {
        int number = sent < 0 ? errno : EIO;
        close(fd);
        errno = number;
        return -1;
    }
    /* Large enough for one inet_diag_msg with its attributes, or an error message. */
    uint32_t buffer[2048];
    for (;;) {
        struct pollfd ready = {.fd = fd, .events = POLLIN, .revents = 0};
        int polled = poll(&ready, 1, 1000);
        if (polled < 0 && errno == EINTR) continue;
        if (polled <= 0) {
            close(fd);
            errno = polled == 0 ? ETIMEDOUT : errno;
            return -1;
        }
        ssize_t received = recv(fd, buffer, sizeof buffer, 0);
        if (received < 0 && errno == EINTR) continue;
        if (received < 0) {
            int number = errno;
            close(fd);
            errno = number;
            return -1;
        }
        int length = (int)received;
        for (struct nlmsghdr *header = (struct nlmsghdr *)buffer; NLMSG_OK(header, length);
             header = NLMSG_NEXT(header, length)) {
            if (header->nlmsg_seq != 1) continue;
            if (header->nlmsg_type == NLMSG_ERROR) {
                const struct nlmsgerr *failure = (const struct nlmsgerr *)NLMSG_DATA(header);
                close(fd);
                errno = failure->error < 0 ? -failure->error : EIO;
                return -1;
            }
            if (header->nlmsg_type == NLMSG_DONE) {
                close(fd);
                errno = ENOENT;
                return -1;
            }
            if (header->nlmsg_type != SOCK_DIAG_BY_FAMILY ||
                header->nlmsg_len < NLMSG_LENGTH(sizeof(struct inet_diag_msg)))
                continue;
            const struct inet_diag_msg *found = (const struct inet_diag_msg *)NLMSG_DATA(header);
            close(fd);
            /* inode 0: no process holds the socket (time-wait and orphaned sockets report uid 0). */
            if (found->idiag_inode == 0) {
                errno = ENOENT;
                return -1;
            }
            *uid = found->idiag_uid;
            return 0;
        }
    }
}
