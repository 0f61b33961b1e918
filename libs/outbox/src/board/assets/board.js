// The outbox board's only script: refreshes the live parts of a page without a full reload, and lets the
// operator pause that (WCAG 2.2.2). Everything else works without it. No framework, no build step.
(function () {
  'use strict';
  var body = document.body;
  var every = Number(body.getAttribute('data-refresh-ms')) || 0;
  var regions = document.querySelectorAll('[data-live-src]');
  if (every <= 0 || regions.length === 0) return;
  var paused = false;
  var toggle = document.querySelector('.live-toggle');
  var status = document.querySelector('.live-status');
  if (toggle) {
    toggle.hidden = false;
    toggle.addEventListener('click', function () {
      paused = !paused;
      toggle.setAttribute('aria-pressed', String(paused));
      toggle.textContent = paused ? 'Resume live updates' : 'Pause live updates';
    });
  }
  function refresh(region) {
    // never swap out what the keyboard is on
    if (region.contains(document.activeElement)) return Promise.resolve();
    return fetch(region.getAttribute('data-live-src'), {
      credentials: 'same-origin',
      headers: { accept: 'text/html' },
    })
      .then(function (response) {
        if (!response.ok) throw new Error('HTTP ' + response.status);
        return response.text();
      })
      .then(function (markup) {
        region.innerHTML = markup;
        body.setAttribute('data-refreshed-at', String(Date.now()));
        if (status) status.textContent = '';
      })
      .catch(function (error) {
        if (status) status.textContent = 'Live update failed (' + error.message + '); retrying.';
      });
  }
  setInterval(function () {
    if (paused || document.hidden) return;
    regions.forEach(refresh);
  }, every);
})();
