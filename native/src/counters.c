/* The periodic counters (spc, mpc): cp_log only counts; the timer thread turns the count into one
 * (period_start_tsc, count) row per period, and the close adds the partial last period. */
#include "internal.h"

static void set_period(cp_channel *ch) {
  ch->period_ticks = cp__ns_to_ticks((uint64_t)atomic_load(&ch->live_params[0]));
  if (!ch->period_ticks) ch->period_ticks = 1;
}

int cp__counter_open(cp_channel *ch, cp_error *error) {
  (void)error;
  set_period(ch);
  ch->period_start_tsc = cp__tsc();
  ch->next_deadline_tsc = ch->period_start_tsc + ch->period_ticks;
  return 0;
}

void cp__counter_parameterized(cp_channel *ch, uint32_t index) {
  (void)index; /* the period is the only parameter */
  pthread_mutex_lock(&ch->mutex);
  set_period(ch);
  pthread_mutex_unlock(&ch->mutex);
  cp__timer_kick();
}

/* Appends the period that ended (or, when final, the partial one) under ch->mutex; returns the next deadline,
 * UINT64_MAX once the channel has closed. */
static uint64_t sample(cp_channel *ch, uint64_t now, bool final) {
  pthread_mutex_lock(&ch->mutex);
  if (ch->batch0 && (final || now >= ch->next_deadline_tsc)) {
    uint64_t count = atomic_load(&ch->calls);
    ch->batch0[ch->batch_len] = (int64_t)ch->period_start_tsc;
    ch->batch1[ch->batch_len] = count - ch->last_count;
    ch->batch_len++;
    atomic_fetch_add(&ch->kept, 1);
    ch->last_count = count;
    /* periods stay in lock step with the first one, also when the sampler wakes late */
    ch->period_start_tsc = ch->next_deadline_tsc;
    uint64_t missed = now > ch->next_deadline_tsc ? (now - ch->next_deadline_tsc) / ch->period_ticks : 0;
    ch->period_start_tsc += missed * ch->period_ticks;
    ch->next_deadline_tsc = ch->period_start_tsc + ch->period_ticks;
    if (final || ch->batch_len == ch->batch_cap) cp__channel_write_batch(ch);
  }
  uint64_t deadline = ch->batch0 ? ch->next_deadline_tsc : UINT64_MAX;
  pthread_mutex_unlock(&ch->mutex);
  return deadline;
}

uint64_t cp__counter_sample(cp_channel *ch, uint64_t now) { return sample(ch, now, false); }

void cp__counter_close(cp_channel *ch) { sample(ch, cp__tsc(), true); }
